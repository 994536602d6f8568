package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stop stops the kubelet, removes every Pod sandbox, stops containerd and
// whatever it left, removes the mounts and the bridge, and deletes the
// control plane. Logs stay in LogDir until the next Start. Safe to call
// more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		var errs []error
		if err := Cleanup(n.logf); err != nil {
			errs = append(errs, err)
		}
		if n.relay != nil {
			_ = n.relay.Close()
			n.relayDone.Wait()
		}
		if n.Cluster != nil {
			if err := n.Cluster.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// Cleanup undoes what a bed (this one, or one killed earlier) left on the
// machine: the kubelet and containerd by their pid files, the sandboxes and
// shims containerd started, the mounts under StateDir, the bridge. It keeps
// the logs. Processes are only killed when their command line names
// StateDir (or, for containers, when they sit in the kubelet's kubepods
// cgroup), so a reused pid is never someone else's process.
func Cleanup(logf func(string, ...any)) error {
	if _, err := os.Stat(StateDir); errors.Is(err, os.ErrNotExist) {
		return deleteBridge()
	}
	var errs []error
	_, _, _, logDir, pidDir := dirs()
	// The kubelet first, or it would start again what is being removed.
	stopByPIDFile(filepath.Join(pidDir, "kubelet.pid"), logf)
	// Sandboxes through the CRI while containerd still runs.
	removeSandboxes(logf)
	stopByPIDFile(filepath.Join(pidDir, "containerd.pid"), logf)
	// Shims outlive containerd; they name its state dir in their arguments.
	for _, pid := range pidsNaming(StateDir) {
		logf("realnode: killing leftover process %d", pid)
		killWait(pid)
	}
	// Containers whose shim is gone.
	for _, pid := range kubepodsPIDs() {
		logf("realnode: killing leftover container process %d", pid)
		killWait(pid)
	}
	if err := unmountUnder(StateDir); err != nil {
		errs = append(errs, err)
	}
	if err := deleteBridge(); err != nil {
		errs = append(errs, err)
	}
	// Everything but the logs, which stay for whoever reads a failure.
	entries, _ := os.ReadDir(StateDir)
	for _, e := range entries {
		if p := filepath.Join(StateDir, e.Name()); p != logDir {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every Pod sandbox through crictl, so
// containerd tears down their containers, mounts and network namespaces.
func removeSandboxes(logf func(string, ...any)) {
	binDir, err := resolveBinDir("")
	if err != nil {
		return
	}
	containerdDir, _, _, _, _ := dirs()
	sock := filepath.Join(containerdDir, "containerd.sock")
	if _, err := os.Stat(sock); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "crictl"), "--runtime-endpoint", "unix://"+sock, "--timeout", "30s", "rmp", "--all", "--force")
	if out, err := cmd.CombinedOutput(); err != nil {
		logf("realnode: crictl rmp: %v: %s", err, out)
	}
}

func stopByPIDFile(path string, logf func(string, ...any)) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || !names(pid, StateDir) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(15 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		logf("realnode: %s (pid %d) ignored SIGTERM; killing it", filepath.Base(path), pid)
		killWait(pid)
	}
	_ = os.Remove(path)
}

func killWait(pid int) {
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(50 * time.Millisecond)
	}
}

// names reports whether pid's command line mentions s.
func names(pid int, s string) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(cmdline, []byte(s))
}

func pidsNaming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if names(pid, s) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kubepodsPIDs lists the processes in the kubelet's Pod cgroups (cgroup v1
// pids hierarchy): only this bed's kubelet creates kubepods.
func kubepodsPIDs() []int {
	var pids []int
	root := "/sys/fs/cgroup/pids/kubepods"
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil //nolint:nilerr // a cgroup removed while walking
		}
		data, _ := os.ReadFile(path)
		for f := range strings.FieldsSeq(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func deleteBridge() error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", Bridge)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := exec.Command("ip", "link", "del", Bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link del %s: %w: %s", Bridge, err, out)
	}
	return nil
}

// alive reports a live process; a zombie counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
