// Package goinstall checks that users can install the plugin the way the
// README tells them, `go install .../cmd/kubectl-stepwise@<version>`, which
// refuses any module whose go.mod has a replace directive. It builds a
// module proxy on the file system from this checkout, as the public proxy
// would serve it from a tag, installs from it and runs what it installed.
//
// It needs the network for the dependencies that are not in the local
// module cache already (GOPROXY as configured), and takes about a minute
// the first time, when the build cache has none of the plugin's packages.
package goinstall

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const (
	modulePath = "github.com/stepwise-dev/stepwise"
	// version is a release this test pretends to publish.
	version = "v0.2.0"
)

func TestGoInstallFromAModuleProxy(t *testing.T) {
	root := repoRoot(t)
	proxy := t.TempDir()
	publish(t, root, proxy)

	// A module cache of its own, so that the pretend release never lands in
	// the real one (where a later run would find this run's files under the
	// same version). Dependencies come from the real cache when it has them
	// (its download directory is a proxy too), else from GOPROXY.
	realProxy := goEnv(t, "GOPROXY")
	downloads := filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download")
	gobin := t.TempDir()
	cmd := exec.Command("go", "install", modulePath+"/cmd/kubectl-stepwise@"+version)
	cmd.Dir = t.TempDir() // outside any module, as a user runs it
	cmd.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(downloads)+","+realProxy,
		// The checksum database has never heard of this release.
		"GONOSUMDB=github.com/stepwise-dev",
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOMODCACHE="+t.TempDir(),
		"GOBIN="+gobin,
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
	began := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/kubectl-stepwise@%s: %v\n%s", modulePath, version, err, out)
	}
	t.Logf("go install took %s", time.Since(began).Round(time.Second))

	out, err := exec.Command(filepath.Join(gobin, "kubectl-stepwise"), "version", "--client").CombinedOutput()
	if err != nil {
		t.Fatalf("the installed plugin: %v\n%s", err, out)
	}
	// The version comes from the module version go install recorded.
	if want := "Plugin:   " + version + " ("; !strings.HasPrefix(string(out), want) {
		t.Errorf("kubectl-stepwise version --client printed\n%s\nwant it to start with %q", out, want)
	}
}

// publish writes what a module proxy serves for the release: the version
// list, its .info, its go.mod and its zip, made from the files git would
// commit (tracked, and untracked unless ignored: bin/ and dist/ are not).
func publish(t *testing.T, root, proxy string) {
	t.Helper()
	escaped, err := module.EscapePath(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	var zip bytes.Buffer
	if err := modzip.Create(&zip, module.Version{Path: modulePath, Version: version}, filesOf(t, root)); err != nil {
		t.Fatalf("zipping the module: %v", err)
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  goMod,
		version + ".zip":  zip.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("module zip: %d bytes", zip.Len())
}

// filesOf lists the files of the checkout that a commit would hold. The
// zip leaves out the nested modules (hack/kube, ...) itself.
func filesOf(t *testing.T, root string) []modzip.File {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("listing the checkout's files with git: %v", err)
	}
	var files []modzip.File
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		path := filepath.Join(root, filepath.FromSlash(name))
		fi, err := os.Lstat(path)
		if os.IsNotExist(err) {
			continue // deleted, not committed yet
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{name: name, path: path, info: fi})
	}
	return files
}

type file struct {
	name, path string
	info       os.FileInfo
}

func (f file) Path() string                 { return f.name }
func (f file) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.path) }

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

// repoRoot is the directory of the main module's go.mod (this test lives
// in the test module, below it).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := envtestenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
