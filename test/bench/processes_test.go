package bench

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/test/kruise"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// controllerProcess is a controller whose memory and CPU the benchmark reads
// from /proc; cmd is nil for a process the cluster owns (kube-controller-manager).
type controllerProcess struct {
	pid int
	cmd *exec.Cmd
	// metricsURL is the controller's plain-HTTP /metrics on loopback, when
	// the benchmark reads it (Stepwise's).
	metricsURL string
}

func startProcess(b *testing.B, binary string, env []string, args ...string) *controllerProcess {
	// Kept after the run, for looking into a surprising figure.
	logFile, err := os.CreateTemp("", "stepwise-bench-"+filepath.Base(binary)+"-*.log")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", binary, err)
	}
	p := &controllerProcess{pid: cmd.Process.Pid, cmd: cmd}
	b.Cleanup(p.stop)
	b.Logf("%s started (pid %d), log %s", filepath.Base(binary), p.pid, logFile.Name())
	return p
}

func (p *controllerProcess) stop() {
	if p.cmd == nil || p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// resetPeak restarts the kernel's high-water mark of resident memory, so
// that peakRSS is the peak of one pass.
func (p *controllerProcess) resetPeak(b *testing.B) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.pid), []byte("5"), 0); err != nil {
		b.Fatalf("resetting the peak RSS of %d: %v", p.pid, err)
	}
}

func (p *controllerProcess) peakRSS(b *testing.B) int64 {
	v, err := p.statusBytes("VmHWM:")
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// rss is the resident memory now; 0 when it cannot be read.
func (p *controllerProcess) rss() int64 {
	v, _ := p.statusBytes("VmRSS:")
	return v
}

// statusBytes reads one kB field of /proc/PID/status, in bytes.
func (p *controllerProcess) statusBytes(field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, fmt.Errorf("reading memory of %d: %w", p.pid, err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, field) {
			kib, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %q: %w", line, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.pid)
}

// cpuSeconds is the process's user plus system time (USER_HZ is 100 on Linux).
func (p *controllerProcess) cpuSeconds(b *testing.B) float64 {
	cpu, err := kwokcluster.ProcessCPUSeconds(p.pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// bedCPUSeconds reads the CPU time of each of the cluster's processes; one
// whose pid file names no process (it has exited) is left out.
func bedCPUSeconds(b *testing.B, cluster *kwokcluster.Cluster) map[string]float64 {
	pids, err := cluster.ComponentPIDs()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for name, pid := range pids {
		if cpu, err := kwokcluster.ProcessCPUSeconds(pid); err == nil {
			out[name] = cpu
		}
	}
	return out
}

func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:3], " ")
}

func waitHTTP(b *testing.B, url, what string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not ready after %s", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startStepwise builds and runs cmd/manager with its defaults plus extra
// flags, named so that its user agent says stepwise-manager.
func startStepwise(b *testing.B, kubeconfig string, extra ...string) *controllerProcess {
	return startStepwiseWithEnv(b, kubeconfig, nil, extra...)
}

// startStepwiseWithEnv is startStepwise with more environment for the
// manager alone (KEY=VALUE), such as GOGC, which set for the whole run
// would also reach the API server and kwok.
func startStepwiseWithEnv(b *testing.B, kubeconfig string, env []string, extra ...string) *controllerProcess {
	binary := buildManager(b, "stepwise-manager")
	metricsAddr, probeAddr := freeAddr(b), freeAddr(b)
	args := append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address", metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address", probeAddr, "--zap-log-level", "error"}, extra...)
	p := startProcess(b, binary, env, args...)
	waitHTTP(b, "http://"+probeAddr+"/readyz", "Stepwise manager", time.Minute)
	p.metricsURL = "http://" + metricsAddr + "/metrics"
	return p
}

// startKruise runs OpenKruise's manager off-cluster in its local-debug mode:
// the webhook on 127.0.0.1 with certificates in a directory of ours.
func startKruise(b *testing.B, kubeconfig string, qps []string) *controllerProcess {
	binary := *kruiseBinary
	if binary == "" {
		var err error
		if binary, err = kruise.Binary(); err != nil {
			b.Fatal(err)
		}
	}
	probeAddr := freeAddr(b)
	env, args := kruise.Command(kubeconfig, b.TempDir(), kruise.Addrs{
		WebhookPort: strings.TrimPrefix(freeAddr(b), "127.0.0.1:"), Metrics: freeAddr(b), HealthProbe: probeAddr,
	}, qps)
	p := startProcess(b, binary, env, args...)
	waitHTTP(b, "http://"+probeAddr+"/readyz", "OpenKruise manager", 2*time.Minute)
	return p
}
