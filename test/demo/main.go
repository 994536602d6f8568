// Command demo tells Stepwise's story on a laptop, everything on 127.0.0.1:
// a kwok cluster, a traffic simulator, Prometheus and the controllers. A good
// release (v2) is promoted step by step; a bad one (v3, 20% errors) is
// aborted by the analysis and its canary Pods are rolled back in place.
//
//	make demo            # builds the test assets first
//	go -C test run ./demo   # once they exist
//
// It exits 0 when the story went as expected, 1 when it did not, and 130
// when interrupted. Every process it started is stopped on the way out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

func main() {
	os.Exit(mainWithCode())
}

// mainWithCode is main with deferred cleanups that run before the exit.
func mainWithCode() int {
	var opts options
	flag.StringVar(&opts.ExamplesDir, "examples", "", "directory holding the demo's manifests (default: examples/demo of the repository)")
	flag.BoolVar(&opts.NoPrometheus, "no-prometheus", false, "run without Prometheus: the workload gate alone, as when Prometheus is missing")
	flag.BoolVar(&opts.InstallPrometheus, "install-prometheus", true, "when Prometheus is missing and this runs as root, try apt-get install -y prometheus")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()

	opts.Terminal = cli.IsTerminal(os.Stdout)
	opts.Color = cli.ColorEnabled(os.Stdout, os.Getenv)

	// The controllers' log would drown the story: it goes to a file, kept
	// only when something went wrong.
	logFile, err := os.CreateTemp("", "stepwise-demo-*.log")
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: creating the log file: %v\n", err)
		return 1
	}
	opts.Log = logFile

	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	go func() {
		<-ctx.Done()
		// A second Ctrl-C kills at once; children die with us (Pdeathsig,
		// kwokcluster's reaper).
		stopSignals()
	}()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	err = run(ctx, os.Stdout, opts)
	_ = logFile.Close()
	// ctx tells an interruption or the overall timeout from a step's own
	// timeout, which run reports as a plain failure.
	switch {
	case err == nil:
		_ = os.Remove(logFile.Name())
		return 0
	case errors.Is(ctx.Err(), context.Canceled):
		fmt.Fprintf(os.Stderr, "\ndemo interrupted; everything it started is stopped. Controller log: %s\n", logFile.Name())
		return 130
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "\ndemo FAILED: not done within -timeout %s: %v\nController log: %s\n", *timeout, err, logFile.Name())
		return 1
	}
	fmt.Fprintf(os.Stderr, "\ndemo FAILED: %v\nController log: %s\n", err, logFile.Name())
	return 1
}
