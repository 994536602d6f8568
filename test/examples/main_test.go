package examples_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
)

// TestMain runs the tests from examples/ at the repository root: they read its
// files (and their neighbours through ..) by paths relative to it, and they
// live here, in the test module, for the dependencies they need and the
// shipped module does not.
func TestMain(m *testing.M) {
	root, err := envtestenv.RepoRoot()
	if err == nil {
		err = os.Chdir(filepath.Join(root, "examples"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
