package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Preflight checks what the node needs from this machine and returns one
// error naming everything missing, with what to do about it. The real-node
// tests fail on it; they never skip.
func Preflight(binDir string) error {
	var missing []string
	add := func(format string, args ...any) { missing = append(missing, fmt.Sprintf(format, args...)) }

	if os.Geteuid() != 0 {
		add("root: the kubelet and containerd run as root (run the tests as root)")
	}
	var bins []string
	for _, b := range []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "crictl",
		"cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap", "traefik"} {
		if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.Mode()&0o111 == 0 {
			bins = append(bins, b)
		}
	}
	if len(bins) > 0 {
		add("%s in %s: run `make node-assets`", strings.Join(bins, ", "), binDir)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		add("runc in PATH: apt-get install runc")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		add("ip in PATH: apt-get install iproute2")
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
		add("/etc/ssl/certs/ca-certificates.crt, shipped in the manager image: apt-get install ca-certificates")
	}
	for _, c := range missingCgroupControllers() {
		add("cgroup controller %s: mount it (cgroup v1: /sys/fs/cgroup/%s; cgroup v2: enable it in cgroup.subtree_control)", c, c)
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		add("the overlay filesystem, for containerd's overlayfs snapshotter: modprobe overlay")
	}
	for _, kind := range []string{"bridge", "veth"} {
		if err := tryLink(kind); err != nil {
			add("%s network devices (%v): modprobe %s", kind, err, kind)
		}
	}
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		add("/dev/kmsg, which the kubelet's OOM watcher reads")
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("the real node cannot run on this machine; missing:\n  - " + strings.Join(missing, "\n  - "))
}

// missingCgroupControllers lists the controllers the kubelet and runc
// need that are not mounted (v1) or not enabled (v2).
func missingCgroupControllers() []string {
	need := []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer"}
	if data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		have := strings.Fields(string(data))
		var missing []string
		for _, c := range []string{"cpu", "cpuset", "memory", "pids"} {
			if !contains(have, c) {
				missing = append(missing, c)
			}
		}
		return missing
	}
	var missing []string
	for _, c := range need {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "cgroup.procs")); err != nil {
			missing = append(missing, c)
		}
	}
	return missing
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tryLink creates and deletes a network device of the kind, which is how
// to find out whether the kernel has it (built in or as a module).
func tryLink(kind string) error {
	name := "swpre" + kind[:2]
	args := []string{"link", "add", name, "type", kind}
	if kind == "veth" {
		args = append(args, "peer", "name", name+"p")
	}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s", strings.TrimSpace(string(out)))
	}
	_ = exec.Command("ip", "link", "del", name).Run()
	return nil
}
