package promrunner

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills Prometheus when the process that started it dies (a
// go test timeout, a crash, kill -9 of the demo), so no orphan keeps its port
// and data directory. Go does not retire OS threads it did not lock, so the
// "parent thread" Pdeathsig watches lives as long as the process.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
