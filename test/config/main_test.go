package config_test

import (
	"os"
	"testing"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
)

// TestMain runs the tests from config/ at the repository root: they read its
// files (and their neighbours through ..) by relative paths, and live in
// the test module for the dependencies only they need.
func TestMain(m *testing.M) { os.Exit(envtestenv.RunIn(m, "config")) }
