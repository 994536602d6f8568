package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
)

// findPrometheus returns the Prometheus binary, installing Debian's package
// first when it is missing, allowed, and possible (root, apt-get). The error
// says why there is none.
func findPrometheus(ctx context.Context, p *progress, opts options) (string, error) {
	if opts.NoPrometheus {
		return "", errors.New("disabled with -no-prometheus")
	}
	binary, err := promrunner.Available(promrunner.Options{})
	if err == nil {
		return binary, nil
	}
	switch {
	case !opts.InstallPrometheus:
		return "", err
	case os.Getenv(promrunner.BinaryEnv) != "":
		// The package would not put it where the variable points.
		return "", err
	case os.Geteuid() != 0:
		return "", fmt.Errorf("%w (not root, so not trying apt-get)", err)
	}
	if _, lookErr := exec.LookPath("apt-get"); lookErr != nil {
		return "", fmt.Errorf("%w (no apt-get to install it with)", err)
	}
	p.detail("Prometheus is missing; trying: apt-get install -y prometheus")
	if installErr := aptInstall(ctx, p); installErr != nil {
		return "", fmt.Errorf("%w; apt-get failed: %w", err, installErr)
	}
	return promrunner.Available(promrunner.Options{})
}

// aptInstall installs Debian's prometheus package, refreshing the package
// lists once if the first try fails (containers often ship without them).
func aptInstall(ctx context.Context, p *progress) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		// RUNLEVEL=1 makes invoke-rc.d skip starting the packaged service:
		// the demo runs its own Prometheus and wants port 9090 left alone.
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "RUNLEVEL=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, strings.Join(lines[max(0, len(lines)-5):], "\n"))
		}
		return nil
	}
	if err := apt("install", "-y", "prometheus"); err == nil {
		return nil
	}
	p.detail("install failed; running apt-get update and trying again")
	if err := apt("update"); err != nil {
		return err
	}
	return apt("install", "-y", "prometheus")
}
