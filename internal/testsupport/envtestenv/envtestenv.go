// Package envtestenv prepares a real kube-apiserver and etcd for
// integration tests: the pinned binaries from bin/ and Stepwise's CRDs.
package envtestenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// New returns an Environment ready to Start. Binaries come from
// $KUBEBUILDER_ASSETS when set, else from the repository's bin/ (make
// test-assets); CRDs from config/crd/bases plus extraCRDDirs, which are
// relative to the repository root or absolute (GatewayAPICRDs).
func New(extraCRDDirs ...string) (*envtest.Environment, error) {
	return NewWithCRDs(append([]string{filepath.Join("config", "crd", "bases")}, extraCRDDirs...)...)
}

// NewWithCRDs is New with exactly crdDirs installed (none: a bare API
// server, for tests that install Stepwise's CRDs themselves).
func NewWithCRDs(crdDirs ...string) (*envtest.Environment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	var crds []string
	for _, dir := range crdDirs {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		crds = append(crds, dir)
	}
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		env.BinaryAssetsDirectory = filepath.Join(root, "bin")
	}
	return env, nil
}

// GatewayAPICRDs are the Gateway API standard CRDs that traffic routing
// uses (HTTPRoute, Gateway, GatewayClass, ReferenceGrant), as files of the
// sigs.k8s.io/gateway-api module that go.mod requires, from the module
// cache: the version under test is the version the code builds against.
func GatewayAPICRDs() ([]string, error) {
	dir, err := GatewayAPIStandardCRDDir()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, kind := range []string{"httproutes", "gateways", "gatewayclasses", "referencegrants"} {
		f := filepath.Join(dir, "gateway.networking.k8s.io_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("gateway API CRD: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// GatewayAPIStandardCRDDir is the folder of every Gateway API standard
// channel CRD (and a ValidatingAdmissionPolicy) in the sigs.k8s.io/gateway-api
// module that go.mod requires, in the module cache.
func GatewayAPIStandardCRDDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating sigs.k8s.io/gateway-api in the module cache: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard"), nil
}

// ModulePath is the main module's path: RepoRoot looks for the go.mod that
// declares it, past nested modules such as test/ and hack/*.
const ModulePath = "github.com/stepwise-dev/stepwise"

// RepoRoot is the directory of the main module's go.mod, from the working
// directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding repository root: %w", err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(data, ModulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding repository root: no go.mod of %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether a go.mod's module line names path.
func declaresModule(gomod []byte, path string) bool {
	for line := range strings.Lines(string(gomod)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == path
		}
	}
	return false
}

// Start starts env, saying what to build when the binaries are missing, and
// returns its config and the function that stops it.
func Start(env *envtest.Environment) (*rest.Config, func(), error) {
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting envtest (run 'make test-assets' first): %w", err)
	}
	return cfg, func() { _ = env.Stop() }, nil
}

// StartSuite is New(crdDirs...) started, for a package's TestMain.
func StartSuite(crdDirs ...string) (*envtest.Environment, *rest.Config, func(), error) {
	env, err := New(crdDirs...)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, stop, err := Start(env)
	return env, cfg, stop, err
}

// StartForTest is New(crdDirs...) started for one test and stopped when it
// ends.
func StartForTest(t testing.TB, crdDirs ...string) *rest.Config {
	t.Helper()
	env, err := New(crdDirs...)
	return startForTest(t, env, err)
}

// StartBareForTest is an API server without CRDs for one test.
func StartBareForTest(t testing.TB) *rest.Config {
	t.Helper()
	env, err := NewWithCRDs()
	return startForTest(t, env, err)
}

func startForTest(t testing.TB, env *envtest.Environment, err error) *rest.Config {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	cfg, stop, err := Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return cfg
}

// RunIn runs m's tests from dir (relative to the repository root) and
// returns their exit code, for a TestMain whose tests read dir's files by
// relative paths but live in the test module.
func RunIn(m *testing.M, dir string) int {
	root, err := RepoRoot()
	if err == nil {
		err = os.Chdir(filepath.Join(root, dir))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
