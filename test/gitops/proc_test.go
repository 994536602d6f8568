package gitops

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is a tool the test runs; it is killed by its pid in t.Cleanup,
// and its log's tail printed when the test failed.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProcess(t *testing.T, name, binary string, env []string, args ...string) *process {
	t.Helper()
	return startProcessAs(t, name, binary, binary, env, args...)
}

// startProcessAs runs binary with argv[0] set to as, for multi-call
// binaries that act by their name (Argo CD's).
func startProcessAs(t *testing.T, name, binary, as string, env []string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(logDir(t), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Args[0] = as
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// The tool dies with the test process, should the cleanup not run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Logf("%s started (pid %d), log %s", name, cmd.Process.Pid, logPath)
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("---- %s (last %d lines of %s)\n%s", name, len(lines), logPath, strings.Join(lines, "\n"))
		}
	})
	return p
}

// logDir keeps the tools' logs: $STEPWISE_GITOPS_LOG_DIR when set (make
// test-gitops sets it beside its own log), else the test's temporary
// directory.
func logDir(t *testing.T) string {
	if d := os.Getenv("STEPWISE_GITOPS_LOG_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}
