package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeMD(t *testing.T, text string) (root, file string) {
	t.Helper()
	root = t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "x.md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, "x.md"
}

func TestExtract(t *testing.T) {
	root, file := writeMD(t, strings.Join([]string{
		"# T",
		"```sh",
		"echo one",
		"```",
		"",
		"<!-- not-runnable: needs a cloud -->",
		"",
		"```bash",
		"gcloud x",
		"```",
		"```yaml",
		"a: 1",
		"```",
		"<!-- runs-until-interrupted -->",
		"````console",
		"$ kubectl get pods -w",
		"NAME READY",
		"````",
		"<!-- test-setup: local-bin -->",
		"```shell",
		"cp a ~/.local/bin/",
		"```",
		"text",
		"```sh",
		"echo after text",
		"```",
	}, "\n"))
	blocks, err := Extract(root, file)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: file, Line: 2, Lang: "sh", Body: "echo one\n"},
		{File: file, Line: 8, Lang: "bash", Body: "gcloud x\n", Marker: NotRunnable, Arg: "needs a cloud"},
		{File: file, Line: 15, Lang: "console", Body: "kubectl get pods -w\n", Marker: Serve, YAMLAbove: "a: 1\n"},
		{File: file, Line: 20, Lang: "shell", Body: "cp a ~/.local/bin/\n", Marker: Setup, Arg: "local-bin", YAMLAbove: "a: 1\n"},
		{File: file, Line: 24, Lang: "sh", Body: "echo after text\n", YAMLAbove: "a: 1\n"},
	}
	if len(blocks) != len(want) {
		t.Fatalf("got %d blocks %+v, want %d", len(blocks), blocks, len(want))
	}
	for i := range want {
		if blocks[i] != want[i] {
			t.Errorf("block %d: got %+v, want %+v", i, blocks[i], want[i])
		}
	}
}

func TestExtractRefusesMisspeltMarker(t *testing.T) {
	root, file := writeMD(t, "<!-- not-runable: x -->\n```sh\nls\n```\n")
	// "not-runable" does not match the marker: the block would run unmarked.
	if _, err := Extract(root, file); err == nil {
		t.Fatal("a misspelt marker was accepted")
	}
}

func TestExtractRefusesUnclosedFence(t *testing.T) {
	root, file := writeMD(t, "```sh\nls\n")
	if _, err := Extract(root, file); err == nil {
		t.Fatal("an unclosed block was accepted")
	}
}

func TestCheck(t *testing.T) {
	blocks := []Block{
		{File: "a.md", Line: 1, Marker: NotRunnable},
		{File: "a.md", Line: 2, Marker: NotRunnable, Arg: "needs a cloud"},
		{File: "a.md", Line: 3, Marker: Setup, Arg: "nope"},
		{File: "a.md", Line: 4, Marker: Setup, Arg: "local-bin"},
		{File: "a.md", Line: 5, Marker: Run},
	}
	got := Check(blocks, func(s string) bool { return s == "local-bin" })
	if len(got) != 2 || !strings.Contains(got[0], "a.md:1") || !strings.Contains(got[1], "a.md:3") {
		t.Fatalf("got %q, want problems for a.md:1 (no reason) and a.md:3 (unknown setup)", got)
	}
}

// A variable a block sets reaches the file's later blocks, as in one shell.
func TestVariablesReachLaterBlocks(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "vars.sh")
	if err := os.WriteFile(state, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+dir)
	run(t, Block{File: "x.md", Line: 1, Body: "VERSION=v0.2.0\n"}, dir, env, scriptFor(Block{Body: "VERSION=v0.2.0\n"}, state))
	check := Block{File: "x.md", Line: 5, Body: "test \"${VERSION#v}\" = 0.2.0 > ok\n"}
	run(t, check, dir, env, scriptFor(check, state))
	if _, err := os.Stat(filepath.Join(dir, "ok")); err != nil {
		t.Fatalf("the second block did not see VERSION: %v", err)
	}
}
