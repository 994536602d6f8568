//go:build !linux

package promrunner

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux; Stop still kills
// Prometheus when the caller ends normally.
func setDeathSignal(*exec.Cmd) {}
