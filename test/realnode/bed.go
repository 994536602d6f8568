// Package realnode is the real-node test bed: the repository's pinned
// control plane (a kwokctl cluster without kwok) joined by one real kubelet
// over a containerd of its own, with Pods on a bridge network whose IPs this
// machine reaches. Images are imported into containerd, never pulled: the
// manager's from the release (`make release`, FindRelease), the pause and
// demo-app images built here from Go binaries (no registry, no Docker).
//
// What the node needs from the machine is checked first (Preflight) and a
// missing piece fails the test with its name; nothing is skipped. Everything
// the bed starts is stopped by process id and its mounts are removed when it
// stops, and a run that was killed is cleaned up by the next one: the bed's
// state lives in one fixed directory (StateDir) with the pids it started.
//
// Network: Pods get addresses on PodSubnet behind the bridge Bridge, which
// holds the gateway address and the kubernetes Service's ClusterIP. Pods
// reach the API server through that ClusterIP, served by a TCP relay in the
// test process (there is no kube-proxy); the host reaches Pods directly.
// The bridge plugin runs with isGateway false, so the bed never turns on IP
// forwarding: a packet from a Pod can reach this machine and other Pods,
// nothing else.
package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

const (
	// NodeName is the real node's name.
	NodeName = "stepwise-realnode"
	// StateDir holds everything the bed writes and mounts. It is fixed so
	// that a run can clean up after a killed one.
	StateDir = "/var/tmp/stepwise-realnode"
	// Bridge is the Pods' bridge.
	Bridge = "swnode0"
	// PodSubnet is where Pod IPs come from; Gateway is the bridge's address.
	PodSubnet = "10.244.0.0/24"
	Gateway   = "10.244.0.1"
	// ServiceIP is the kubernetes Service's ClusterIP: the first address of
	// kube-apiserver's default --service-cluster-ip-range, 10.0.0.0/24.
	ServiceIP = "10.0.0.1"
	// SandboxImage is containerd's pause image, built by the bed.
	SandboxImage = "stepwise.local/pause:realnode"
	// apiServerRelayPort is where Pods reach the API server (ServiceIP:443).
	apiServerRelayPort = 443
)

// Node is a running bed.
type Node struct {
	Cluster    *kwokcluster.Cluster
	Clientset  kubernetes.Interface
	RESTConfig *rest.Config

	binDir string
	logf   func(string, ...any)

	relay     net.Listener
	relayDone sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// Options configures Start.
type Options struct {
	// BinDir holds kubelet, containerd, ctr, crictl, the kwok cluster's
	// binaries and cni/; empty means $STEPWISE_BIN or bin/.
	BinDir string
	// Images are image tarballs to import into containerd's k8s.io
	// namespace before the kubelet starts; one must hold SandboxImage.
	Images []string
	// Logf receives progress (t.Logf fits).
	Logf func(string, ...any)
}

func dirs() (containerd, kubelet, cni, logs, pids string) {
	return filepath.Join(StateDir, "containerd"), filepath.Join(StateDir, "kubelet"),
		filepath.Join(StateDir, "cni"), filepath.Join(StateDir, "logs"), filepath.Join(StateDir, "pids")
}

// Start checks the machine, cleans up after an earlier run that was killed,
// and brings up the control plane, containerd and the kubelet. It returns
// once the node is Ready. On error, what it started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if err := Preflight(binDir); err != nil {
		return nil, err
	}
	n := &Node{binDir: binDir, logf: opts.Logf}
	if n.logf == nil {
		n.logf = func(string, ...any) {}
	}
	if err := Cleanup(n.logf); err != nil {
		return nil, fmt.Errorf("cleaning up after an earlier run: %w", err)
	}
	defer func() {
		if err != nil {
			if stopErr := n.Stop(); stopErr != nil {
				n.logf("realnode: stopping after a failed start: %v", stopErr)
			}
		}
	}()
	containerdDir, kubeletDir, cniDir, logDir, pidDir := dirs()
	for _, d := range []string{containerdDir, kubeletDir, filepath.Join(cniDir, "net.d"), filepath.Join(cniDir, "ipam"), logDir, pidDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}

	n.Cluster, err = kwokcluster.Start(ctx, kwokcluster.Options{
		BinDir:            binDir,
		NoKwokController:  true,
		APIServerCertSANs: []string{ServiceIP, Gateway},
		Logf:              n.logf,
	})
	if err != nil {
		return nil, err
	}
	n.Clientset, n.RESTConfig = n.Cluster.Clientset(), n.Cluster.RESTConfig
	if err := n.checkServiceIP(ctx); err != nil {
		return nil, err
	}
	if err := n.network(); err != nil {
		return nil, err
	}
	if err := n.startRelay(); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	for _, img := range opts.Images {
		if err := n.Ctr(ctx, "images", "import", "--local", img); err != nil {
			return nil, err
		}
	}
	if err := n.startKubelet(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("STEPWISE_BIN")
	}
	if dir == "" {
		root, err := envtestenv.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	return filepath.Abs(dir)
}

// checkServiceIP makes sure the kubernetes Service has the ClusterIP that
// the API server's certificate and the bridge were given.
func (n *Node) checkServiceIP(ctx context.Context) error {
	svc, err := n.Clientset.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the kubernetes Service: %w", err)
	}
	if svc.Spec.ClusterIP != ServiceIP {
		return fmt.Errorf("the kubernetes Service has ClusterIP %s; the bed serves %s", svc.Spec.ClusterIP, ServiceIP)
	}
	return nil
}

// network creates the Pods' bridge with the gateway and the kubernetes
// Service's address, and the CNI configuration containerd reads.
func (n *Node) network() error {
	for _, args := range [][]string{
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", Gateway + "/24", "dev", Bridge},
		{"addr", "add", ServiceIP + "/32", "dev", Bridge},
		{"link", "set", Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	_, _, cniDir, _, _ := dirs()
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "stepwise-realnode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0", "gw": %q}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, Bridge, filepath.Join(cniDir, "ipam"), PodSubnet, Gateway, Gateway)
	return os.WriteFile(filepath.Join(cniDir, "net.d", "10-stepwise.conflist"), []byte(conf), 0o644)
}

// containerdConfig is containerd's configuration: its own root, state and
// socket, cgroupfs, and restrict_oom_score_adj because a VM without
// CAP_SYS_RESOURCE fails every sandbox otherwise ("can't get final child's
// PID from pipe: EOF" from runc).
const containerdConfig = `version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[5]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[8]q

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
`

func (n *Node) socket() string {
	containerdDir, _, _, _, _ := dirs()
	return filepath.Join(containerdDir, "containerd.sock")
}

func (n *Node) startContainerd(ctx context.Context) error {
	containerdDir, _, cniDir, _, _ := dirs()
	runc, err := exec.LookPath("runc")
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(containerdConfig, filepath.Join(containerdDir, "root"), filepath.Join(containerdDir, "state"),
		n.socket(), n.socket()+".ttrpc", SandboxImage, filepath.Join(n.binDir, "cni"), filepath.Join(cniDir, "net.d"), runc)
	path := filepath.Join(containerdDir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := n.daemon("containerd", filepath.Join(n.binDir, "containerd"), "--config", path); err != nil {
		return err
	}
	return poll(ctx, 30*time.Second, "containerd to serve", func() (bool, error) {
		return n.Ctr(ctx, "version") == nil, nil
	})
}

// kubeletConfig: cgroup v1 is refused by default since v1.35 (this
// machine has it), the cgroupfs driver matches containerd's, and swap is
// tolerated rather than required off.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
podLogsDir: %[3]s
syncFrequency: 10s
nodeStatusUpdateFrequency: 4s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
`

func (n *Node) startKubelet(ctx context.Context) error {
	_, kubeletDir, _, _, _ := dirs()
	path := filepath.Join(kubeletDir, "config.yaml")
	cfg := fmt.Sprintf(kubeletConfig, n.socket(), Gateway, filepath.Join(kubeletDir, "pod-logs"))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := n.daemon("kubelet", filepath.Join(n.binDir, "kubelet"),
		"--config", path,
		"--kubeconfig", n.Cluster.Kubeconfig,
		"--hostname-override", NodeName,
		"--node-ip", Gateway,
		"--root-dir", filepath.Join(kubeletDir, "root"),
		"--cert-dir", filepath.Join(kubeletDir, "pki"),
		"--v", "2",
	); err != nil {
		return err
	}
	return poll(ctx, 2*time.Minute, "node "+NodeName+" to be Ready", func() (bool, error) {
		node, err := n.Clientset.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// daemon starts a long-running process with its log under StateDir/logs
// and its pid under StateDir/pids, for Stop and for the next run's Cleanup.
func (n *Node) daemon(name, path string, args ...string) error {
	_, _, _, logDir, pidDir := dirs()
	log, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// containerd finds containerd-shim-runc-v2 and runc through PATH.
	cmd.Env = append(os.Environ(), "PATH="+n.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Its own process group, so a Ctrl-C aimed at go test leaves it to Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	n.logf("realnode: %s started, pid %d", name, cmd.Process.Pid)
	return os.WriteFile(filepath.Join(pidDir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// Ctr runs ctr against the bed's containerd in the k8s.io namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(n.binDir, "ctr"), append([]string{"--address", n.socket(), "--namespace", "k8s.io"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Crictl runs crictl against the bed's containerd and returns its output.
func (n *Node) Crictl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.binDir, "crictl"), append([]string{"--runtime-endpoint", "unix://" + n.socket(), "--timeout", "30s"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("crictl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// DaemonPID is the process id of a daemon the bed started ("kubelet",
// "containerd").
func DaemonPID(name string) (int, error) {
	_, _, _, _, pidDir := dirs()
	data, err := os.ReadFile(filepath.Join(pidDir, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("reading the pid of %s: %w", name, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// LogDir holds containerd.log and kubelet.log until the next run.
func LogDir() string {
	_, _, _, logs, _ := dirs()
	return logs
}

func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
