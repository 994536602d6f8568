package kwokcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ComponentPID is the process id of one component kwokctl runs
// ("kube-controller-manager", "kube-apiserver", ...).
func (c *Cluster) ComponentPID(component string) (int, error) {
	data, err := os.ReadFile(filepath.Join(c.Workdir, "clusters", c.Name, "pids", component+".pid"))
	if err != nil {
		return 0, fmt.Errorf("reading pid of %s: %w", component, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("parsing pid of %s: %w", component, err)
	}
	return pid, nil
}

// ComponentPIDs returns the pid of each of the cluster's processes
// (kube-apiserver, etcd, kwok-controller, ...), by component name.
func (c *Cluster) ComponentPIDs() (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(c.Workdir, "clusters", c.Name, "pids", "*.pid"))
	if err != nil {
		return nil, fmt.Errorf("listing component pids: %w", err)
	}
	pids := map[string]int{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if pids[name], err = c.ComponentPID(name); err != nil {
			return nil, err
		}
	}
	return pids, nil
}

// ProcessCPUSeconds is the user and system CPU time of a process so far.
func ProcessCPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of %d: %w", pid, err)
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After the name: state is field 3, utime 14 and stime 15.
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %q", pid, s)
	}
	return (utime + stime) / 100, nil
}

func (c *Cluster) stop() error {
	if c.cancel != nil {
		c.cancel()
	}
	if c.resyncDone != nil {
		<-c.resyncDone
	}

	var errs []error
	// Read the pids before kwokctl removes them, to check nothing survived.
	pids := c.componentPIDs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(c.Workdir, "clusters", c.Name)); err == nil {
		if _, err := c.kwokctl(ctx, "delete", "cluster"); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pid := range pids {
		if err := c.killAndWait(pid, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if c.reaper != nil && c.reaper.Process != nil {
		// Ours, started by startReaper: nothing left for it to clean.
		_ = c.reaper.Process.Kill()
		_ = c.reaper.Wait()
	}
	if err := os.RemoveAll(c.Workdir); err != nil {
		errs = append(errs, fmt.Errorf("removing kwok workdir: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping kwok cluster %s: %w", c.Name, err)
	}
	c.logf("kwokcluster: cluster %s stopped", c.Name)
	return nil
}

// startReaper starts a small shell that deletes the cluster if this process
// dies without calling Stop (a test binary killed by -timeout runs no
// cleanups, and kwokctl's components are detached from us).
func (c *Cluster) startReaper() error {
	const script = `while kill -0 "$1" 2>/dev/null; do sleep 1; done
"$2" delete cluster --name "$3" >/dev/null 2>&1
for f in "$4"/clusters/*/pids/*.pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$4" && kill -9 "$pid"
done
rm -rf "$4"`
	cmd := exec.Command("/bin/sh", "-c", script, "kwokcluster-reaper",
		strconv.Itoa(os.Getpid()), filepath.Join(c.binDir, "kwokctl"), c.Name, c.Workdir)
	cmd.Env = c.env
	// Its own process group: a Ctrl-C aimed at go test must not stop it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting cluster reaper: %w", err)
	}
	c.reaper = cmd
	return nil
}

// componentPIDs reads the pid files kwokctl writes for the components.
func (c *Cluster) componentPIDs() []int {
	files, _ := filepath.Glob(filepath.Join(c.Workdir, "clusters", c.Name, "pids", "*.pid"))
	var pids []int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAndWait makes sure a component kwokctl started (pid from its pid file)
// is gone, killing it if kwokctl delete left it running. A pid whose command
// line does not name our workdir belongs to someone else now and is left
// alone.
func (c *Cluster) killAndWait(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for alive(pid) && c.owns(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d survived SIGKILL", pid)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// owns reports whether pid runs one of this cluster's components: kwokctl
// starts them from the workdir with paths into it.
func (c *Cluster) owns(pid int) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(cmdline, []byte(c.Workdir))
}

// alive reports a live process; a zombie (exited, not reaped by its parent)
// counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
