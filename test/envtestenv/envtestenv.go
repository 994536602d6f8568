// Package envtestenv prepares a real kube-apiserver and etcd for
// integration tests: the pinned binaries from bin/ and Stepwise's CRDs.
package envtestenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stepwise-dev/stepwise/test/kwokcluster"
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
	root, err := kwokcluster.RepoRoot()
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

// InstallGatewayAPI installs GatewayAPICRDs into a kwok cluster. The
// module's folder also holds a ValidatingAdmissionPolicy and experimental
// kinds: only the CRDs the code uses are copied to a folder of their own.
func InstallGatewayAPI(ctx context.Context, c *kwokcluster.Cluster) error {
	files, err := GatewayAPICRDs()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "stepwise-gateway-api-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o600); err != nil {
			return err
		}
	}
	return c.InstallCRDs(ctx, dir)
}

// GatewayAPIStandardCRDDir is the folder of every Gateway API standard
// channel CRD (and a ValidatingAdmissionPolicy) in the sigs.k8s.io/gateway-api
// module that go.mod requires, in the module cache.
func GatewayAPIStandardCRDDir() (string, error) {
	root, err := kwokcluster.RepoRoot()
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
