package promtest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills Prometheus when the test binary dies (for example on
// a go test timeout), so no orphan keeps its port and data directory.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
