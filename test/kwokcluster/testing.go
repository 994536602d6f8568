package kwokcluster

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// StartForTest starts a cluster for t and stops it in t.Cleanup, after
// printing the tail of each component's log if t failed. Options.Logf
// defaults to t.Logf. The resync loop lives until the cleanup.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Start(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("starting kwok cluster: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if t.Failed() {
			c.LogTails(t.Logf, 30)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping kwok cluster: %v", err)
		}
	})
	return c
}

// LogTails prints the last lines of each component's log, for a failed test.
func (c *Cluster) LogTails(logf func(format string, args ...any), lines int) {
	files, _ := filepath.Glob(filepath.Join(c.LogDir(), "*.log"))
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		logf("---- %s (last %d lines)\n%s", filepath.Base(f), lines, tail(string(data), lines))
	}
}
