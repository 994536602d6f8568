package realnode

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TraefikControllerName is the GatewayClass controllerName Traefik's
// kubernetesGateway provider serves.
const TraefikControllerName = "traefik.io/gateway-controller"

// Traefik is a Traefik process on this machine, the Gateway API data plane
// of the real node: its one entryPoint listens on 127.0.0.1 only and its
// kubernetesGateway provider watches the bed's API server. It reaches Pods
// at their IPs on the bridge, from the EndpointSlices it reads.
type Traefik struct {
	// Addr is the entryPoint, 127.0.0.1:Port; a Gateway listener on Port
	// is served there.
	Addr string
	Port int
	// Log is Traefik's log file (under LogDir, kept until the next run).
	Log string

	cmd        *exec.Cmd
	config     string
	kubeconfig string
	binDir     string
	exited     chan struct{}
}

// TraefikOptions says where Traefik runs and which API server it watches.
type TraefikOptions struct {
	// BinDir holds traefik; empty means $STEPWISE_BIN or bin/.
	BinDir string
	// Kubeconfig is the kubeconfig its kubernetesGateway provider uses
	// (through $KUBECONFIG, the provider's way to reach a cluster from
	// outside).
	Kubeconfig string
	// Port of the entryPoint on 127.0.0.1; 0 picks a free one.
	Port int
}

// traefikConfig is Traefik's static configuration. It never calls home
// (checkNewVersion, sendAnonymousUsage) and has no dashboard, API or
// metrics entryPoint. Everything else is Traefik's default, as a user
// would run it, including providersThrottleDuration (2 s): a route can say
// Accepted up to 2 s before its weights are served, and a Pod's endpoint
// can be served up to 2 s after it left the EndpointSlice.
const traefikConfig = `global:
  checkNewVersion: false
  sendAnonymousUsage: false
log:
  level: INFO
  noColor: true
entryPoints:
  web:
    address: %[1]q
providers:
  kubernetesGateway:
    statusAddress:
      ip: 127.0.0.1
`

// StartTraefik writes Traefik's configuration under StateDir (so Cleanup
// finds a Traefik left by a killed run by its command line) and starts it.
// It returns once the entryPoint accepts connections.
func StartTraefik(ctx context.Context, opts TraefikOptions) (*Traefik, error) {
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		if port, err = freeLoopbackPort(); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(StateDir, "traefik")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	config := filepath.Join(dir, "traefik.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, traefikConfig, addr), 0o600); err != nil {
		return nil, err
	}
	tr := &Traefik{Addr: addr, Port: port, Log: filepath.Join(LogDir(), "traefik.log"), config: config, kubeconfig: opts.Kubeconfig, binDir: binDir}
	// One log per run; a restart (Start after Stop) appends to it.
	if err := os.MkdirAll(LogDir(), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(tr.Log, nil, 0o644); err != nil {
		return nil, err
	}
	if err := tr.Start(ctx); err != nil {
		return nil, err
	}
	return tr, nil
}

// Start starts Traefik (again, after Stop) with the same configuration and
// port, and waits for its entryPoint.
func (tr *Traefik) Start(ctx context.Context) error {
	log, err := os.OpenFile(tr.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(filepath.Join(tr.binDir, "traefik"), "--configFile="+tr.config)
	cmd.Stdout, cmd.Stderr = log, log
	// The provider prefers an in-cluster configuration to $KUBECONFIG.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBERNETES_SERVICE_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "KUBECONFIG="+tr.kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting traefik: %w", err)
	}
	tr.cmd, tr.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(tr.exited)
	err = poll(ctx, 30*time.Second, "traefik to listen on "+tr.Addr, func() (bool, error) {
		select {
		case <-tr.exited:
			return false, fmt.Errorf("traefik exited (%v); see %s", cmd.ProcessState, tr.Log)
		default:
		}
		c, err := net.DialTimeout("tcp", tr.Addr, time.Second)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = c.Close()
		return true, nil
	})
	if err != nil {
		return errors.Join(err, tr.Stop())
	}
	return nil
}

// Stop stops Traefik by its pid: SIGTERM, then SIGKILL after 10 s.
func (tr *Traefik) Stop() error {
	if tr.cmd == nil || tr.cmd.Process == nil {
		return nil
	}
	defer func() { tr.cmd = nil }()
	_ = tr.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-tr.exited:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = tr.cmd.Process.Kill()
	select {
	case <-tr.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("traefik (pid %d) did not exit", tr.cmd.Process.Pid)
	}
}

// RemoteAddrs are the remote addresses of Traefik's TCP connections now,
// read from /proc: its socket inodes matched in its network namespace's
// tcp and tcp6 tables. Listening sockets are left out.
func (tr *Traefik) RemoteAddrs() ([]netip.Addr, error) {
	if tr.cmd == nil || tr.cmd.Process == nil {
		return nil, errors.New("traefik is not running")
	}
	proc := filepath.Join("/proc", strconv.Itoa(tr.cmd.Process.Pid))
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var addrs []netip.Addr
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join(proc, "net", table))
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || !inodes[f[9]] || f[3] == tcpListen {
				continue
			}
			addr, err := parseProcAddr(f[2])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", table, err)
			}
			addrs = append(addrs, addr)
		}
	}
	return addrs, nil
}

// tcpListen is the LISTEN state in /proc/net/tcp.
const tcpListen = "0A"

// parseProcAddr reads the address of "HEX:PORT" from /proc/net/tcp{,6}:
// 32-bit words in host (little-endian) order.
func parseProcAddr(s string) (netip.Addr, error) {
	h, _, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return addr.Unmap(), nil
}

// freeLoopbackPort is a TCP port free on 127.0.0.1 now.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
