//go:build !linux

package promtest

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux; cleanup still
// kills Prometheus when the test ends normally.
func setDeathSignal(*exec.Cmd) {}
