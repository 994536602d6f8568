package realnode

// What the side by side measures besides the Pods: the node's sandboxes and
// daemons, the client load through Traefik, and OpenKruise's manager.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/stepwise-dev/stepwise/test/kruise"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// sandboxesSince counts the Pod sandboxes containerd holds for namespace ns
// that were created at or after since.
func (b *bed) sandboxesSince(t *testing.T, ns string, since time.Time) int {
	out, err := b.Crictl(t.Context(), "pods", "--namespace", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			CreatedAt string `json:"createdAt"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("reading crictl pods: %v: %s", err, out)
	}
	created := 0
	for _, s := range list.Items {
		ns, err := strconv.ParseInt(s.CreatedAt, 10, 64)
		if err != nil {
			t.Fatalf("crictl pods: createdAt %q: %v", s.CreatedAt, err)
		}
		if !time.Unix(0, ns).Before(since) {
			created++
		}
	}
	return created
}

// daemonCPU is the CPU time so far of the node's kubelet and containerd.
func daemonCPU(t *testing.T) (kubelet, containerd float64) {
	read := func(name string) float64 {
		pid, err := DaemonPID(name)
		if err != nil {
			t.Fatal(err)
		}
		cpu, err := kwokcluster.ProcessCPUSeconds(pid)
		if err != nil {
			t.Fatal(err)
		}
		return cpu
	}
	return read("kubelet"), read("containerd")
}

// get sends one request through Traefik for host.
func (tr *Traefik) get(host string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+tr.Addr+"/", nil)
	if err != nil {
		return 0, err
	}
	req.Host = host
	resp, err := trafficClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// load is a steady stream of requests, one every 20 ms.
type load struct {
	stopFn       func()
	sent, failed int
}

func (tr *Traefik) steadyLoad(host string) *load {
	l := &load{}
	l.stopFn = every(20*time.Millisecond, func(ctx context.Context) {
		code, err := tr.get(host)
		if ctx.Err() != nil {
			return
		}
		l.sent++
		if err != nil || code != http.StatusOK {
			l.failed++
		}
	})
	return l
}

func (l *load) stop() (sent, failed int) {
	l.stopFn()
	return l.sent, l.failed
}

// startKruise installs and runs OpenKruise's manager on this machine for
// the rest of the test, and removes its webhook configurations after it.
func (b *bed) startKruise(t *testing.T) {
	binary, err := kruise.Binary()
	if err != nil {
		t.Fatal(err)
	}
	uninstall, err := kruise.Install(t.Context(), b.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	probe, metrics, webhook := freeLoopback(t), freeLoopback(t), freeLoopback(t)
	env, args := kruise.Command(b.Cluster.Kubeconfig, t.TempDir(),
		kruise.Addrs{WebhookPort: strings.TrimPrefix(webhook, "127.0.0.1:"), Metrics: metrics, HealthProbe: probe}, nil)
	logPath := filepath.Join(LogDir(), "kruise-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, logPath, 40)
		}
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if err := uninstall(context.Background()); err != nil {
			t.Errorf("removing OpenKruise's webhook configurations: %v", err)
		}
	})
	gomega.NewWithT(t).Eventually(func() error {
		resp, err := httpClient.Get("http://" + probe + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}, 2*time.Minute, 250*time.Millisecond).Should(gomega.Succeed(), "OpenKruise's manager ready; log %s", logPath)
}
