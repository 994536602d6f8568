package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// setups are what <!-- test-setup: NAME --> may ask for: each prepares,
// for block b, the environment env of the file's run in its working
// directory dir.
var setups = map[string]func(b Block, dir string, env []string) error{
	// The block writes into ~/.local/bin, "any directory on PATH": the
	// test's HOME has it, and it is on PATH after bin/.
	"local-bin": func(_ Block, _ string, env []string) error {
		return os.MkdirAll(filepath.Join(envValue(env, "HOME"), ".local", "bin"), 0o755)
	},
}

// runSetup runs a "run: COMMAND" setup. A setup that removes an install
// must keep its CRDs, as helm uninstall does: a CRD deleted seconds after
// it was created can stay Terminating for minutes (the API server's CRD
// finalizer fails with "could not list instances: storage is
// (re)initializing" and backs off), longer than blockTimeout.
func runSetup(dir string, env []string, script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := command(ctx, dir, env, "set -euo pipefail\n"+script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// writeSetupRE: "write PATH from the yaml block above" writes the yaml
// block before the block, as the reader would save it, to PATH in the
// working directory.
var writeSetupRE = regexp.MustCompile(`^write (\S+) from the yaml block above$`)

func setupFor(name string) func(b Block, dir string, env []string) error {
	if f, ok := setups[name]; ok {
		return f
	}
	// "run: COMMAND": the test runs COMMAND first, as the block's reader
	// would have done already (the example the block acts on, applied).
	if command, ok := strings.CutPrefix(name, "run: "); ok && strings.TrimSpace(command) != "" {
		return func(b Block, dir string, env []string) error { return runSetup(dir, env, command) }
	}
	if m := writeSetupRE.FindStringSubmatch(name); m != nil {
		return func(b Block, dir string, _ []string) error {
			if b.YAMLAbove == "" {
				return fmt.Errorf("no yaml block above")
			}
			p := filepath.Join(dir, m[1])
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p, []byte(b.YAMLAbove), 0o644)
		}
	}
	return nil
}

// requiredTools are what the blocks call as a user would, from bin/ (make
// test-assets builds kubectl and helm; make build the plugin).
var requiredTools = []string{"kubectl", "helm", "kubectl-stepwise"}

// blockTimeout bounds one block; a block that takes longer is a failure
// (the docs promise commands a user waits for, not ones that hang).
const blockTimeout = 5 * time.Minute

// serveTimeout bounds the wait for a runs-until-interrupted command's first
// output.
const serveTimeout = time.Minute

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := envtestenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func allBlocks(t *testing.T, root string) map[string][]Block {
	t.Helper()
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]Block{}
	for _, f := range files {
		blocks, err := Extract(root, f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = blocks
	}
	return out
}

// TestEveryBlockIsRunOrMarked needs no cluster: each block of the docs is
// run, or marked not-runnable with a reason; each setup is one the test
// knows.
func TestEveryBlockIsRunOrMarked(t *testing.T) {
	root := repoRoot(t)
	total := 0
	all := allBlocks(t, root)
	for _, f := range sortedKeys(all) {
		blocks := all[f]
		total += len(blocks)
		for _, p := range Check(blocks, func(name string) bool { return setupFor(name) != nil }) {
			t.Error(p)
		}
	}
	if total == 0 {
		t.Fatal("no shell blocks found in the docs")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestDocs runs every file's blocks in order against a kwok cluster of its
// own, with the Stepwise controllers running, as a user would in a shell
// (bin/ first on PATH, KUBECONFIG the cluster's, the repository as working
// directory).
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kwok clusters")
	}
	root := repoRoot(t)
	bin := filepath.Join(root, "bin")
	for _, tool := range requiredTools {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Fatalf("%s missing: make test-assets build puts it in bin/ (%v)", tool, err)
		}
	}
	all := allBlocks(t, root)
	for _, file := range sortedKeys(all) {
		blocks := all[file]
		marked := 0
		for _, b := range blocks {
			if b.Marker == NotRunnable {
				marked++
			}
		}
		if marked == len(blocks) {
			continue
		}
		t.Run(file, func(t *testing.T) {
			ran, skipped := runFile(t, root, bin, blocks)
			t.Logf("%s: %d blocks: %d run, %d not runnable", file, len(blocks), ran, skipped)
			// Only a not-runnable marker skips a block.
			if skipped != marked || ran+skipped != len(blocks) {
				t.Errorf("%d of %d blocks skipped, %d run, but %d marked not-runnable", skipped, len(blocks), ran, marked)
			}
		})
	}
}

// runFile runs blocks in order on a fresh cluster; it returns how many ran
// and how many were skipped as not runnable.
func runFile(t *testing.T, root, bin string, blocks []Block) (ran, skipped int) {
	cluster := kwokcluster.StartForTest(t, kwokcluster.Options{Nodes: 2})
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := harness.StartManager(ctx, cluster.RESTConfig, manager.Options{})
	if err != nil {
		cancel()
		t.Fatalf("starting the controllers: %v", err)
	}
	t.Cleanup(func() { mgr.Stop(); cancel() })

	home := t.TempDir()
	dir := root
	cleanUntracked(t, root)
	state := filepath.Join(t.TempDir(), "vars.sh")
	if err := os.WriteFile(state, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The blocks' HOME is the test's own; Go's caches stay where they are,
	// so that make build finds them.
	goEnv, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	goVars := strings.Split(strings.TrimSpace(string(goEnv)), "\n")
	if len(goVars) != 3 {
		t.Fatalf("go env: %q", goEnv)
	}
	env := append(os.Environ(),
		"GOPATH="+goVars[0], "GOMODCACHE="+goVars[1], "GOCACHE="+goVars[2],
		"HOME="+home,
		"PATH="+bin+string(os.PathListSeparator)+filepath.Join(home, ".local", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cluster.Kubeconfig,
		"NO_COLOR=1",
	)
	// A browser is no part of the test: --open finds none to start.
	env = append(env, "BROWSER=true")
	for _, b := range blocks {
		if b.Marker == NotRunnable {
			t.Logf("%s: not runnable: %s", b, b.Arg)
			skipped++
			continue
		}
		if b.Marker == Setup {
			start := time.Now()
			if err := setupFor(b.Arg)(b, dir, env); err != nil {
				t.Fatalf("%s: test-setup %s: %v after %s", b, b.Arg, err, time.Since(start).Round(time.Millisecond))
			}
			t.Logf("%s: test-setup %s: ok (%s)", b, b.Arg, time.Since(start).Round(time.Millisecond))
		}
		script := scriptFor(b, state)
		if b.Marker == Serve {
			serve(t, b, dir, env, script)
		} else {
			run(t, b, dir, env, script)
		}
		ran++
	}
	return ran, skipped
}

var assignRE = regexp.MustCompile(`(?m)^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=`)

// scriptFor wraps a block: strict mode, the variables earlier blocks of the
// file set, and afterwards those this block sets, for the next.
func scriptFor(b Block, state string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "set -euo pipefail\nsource %q\n", state)
	s.WriteString(b.Body)
	var names []string
	for _, m := range assignRE.FindAllStringSubmatch(b.Body, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	if len(names) > 0 && b.Marker != Serve {
		fmt.Fprintf(&s, "\ndeclare -p %s >> %q\n", strings.Join(names, " "), state)
	}
	return s.String()
}

func command(ctx context.Context, root string, env []string, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Stop the whole group (a pipeline's every process), not bash alone.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func run(t *testing.T, b Block, root string, env []string, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := command(ctx, root, env, script)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s: %v after %s\n--- block:\n%s--- output:\n%s", b, err, time.Since(start).Round(time.Millisecond), b.Body, out.String())
	}
	t.Logf("%s: ok (%s)", b, time.Since(start).Round(time.Millisecond))
}

// serve starts a command that runs until interrupted, waits for its first
// line of output (it is up) and interrupts it. Exiting before that fails.
func serve(t *testing.T, b Block, root string, env []string, script string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	cmd := command(ctx, root, env, script)
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); _ = pw.Close(); exited <- err }()
	first := make(chan string, 1)
	// The rest of the output is read and dropped, so that the command never
	// blocks on a full pipe.
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			first <- sc.Text()
		} else {
			close(first)
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case line, ok := <-first:
		if !ok {
			err := <-exited
			t.Fatalf("%s: exited (%v) without output; it should run until interrupted\n--- block:\n%s", b, err, b.Body)
		}
		select {
		case err := <-exited:
			t.Fatalf("%s: exited (%v) instead of running until interrupted; first line of output: %s", b, err, line)
		default:
		}
		t.Logf("%s: up: %s", b, line)
	case err := <-exited:
		t.Fatalf("%s: exited (%v) before any output; it should run until interrupted\n--- block:\n%s", b, err, b.Body)
	case <-time.After(serveTimeout):
		t.Fatalf("%s: no output within %s\n--- block:\n%s", b, serveTimeout, b.Body)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	// Interrupted, it exits non-zero as a reader's Ctrl-C would make it.
	if err := <-exited; err != nil {
		t.Logf("%s: stopped: %v", b, err)
	}
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// cleanUntracked removes, at the end of t, the untracked files the blocks
// wrote into the checkout (stepwise-install/, rollout.yaml): the blocks run
// in the repository, as a user following the docs would, and a build there
// finds its cache.
func cleanUntracked(t *testing.T, root string) {
	t.Helper()
	before, err := untracked(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		after, err := untracked(root)
		if err != nil {
			t.Error(err)
			return
		}
		for _, f := range after {
			if !slices.Contains(before, f) {
				if err := os.RemoveAll(filepath.Join(root, f)); err != nil {
					t.Error(err)
				}
			}
		}
	})
}

func untracked(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "--others", "--exclude-standard", "--directory")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	return strings.Fields(string(out)), nil
}
