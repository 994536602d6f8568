// Package envtestenv prepares a real kube-apiserver and etcd for
// integration tests: the pinned binaries from bin/ and Stepwise's CRDs.
package envtestenv

import (
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// New returns an Environment ready to Start. Binaries come from
// $KUBEBUILDER_ASSETS when set, else from the repository's bin/ (make
// test-assets); CRDs from config/crd/bases plus extraCRDDirs, which are
// relative to the repository root.
func New(extraCRDDirs ...string) (*envtest.Environment, error) {
	root, err := kwokcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	crds := []string{filepath.Join(root, "config", "crd", "bases")}
	for _, dir := range extraCRDDirs {
		crds = append(crds, filepath.Join(root, dir))
	}
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		env.BinaryAssetsDirectory = filepath.Join(root, "bin")
	}
	return env, nil
}
