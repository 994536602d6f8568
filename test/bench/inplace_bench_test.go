// Package bench measures the in-place update of many Pods on a kwok cluster:
// wall time until every Pod is updated and ready, API writes per Pod, and
// the manager's peak memory. Run it with `make bench` (PODS=N to resize).
package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

var podCount = flag.Int("pods", 1000, "Pods in the benchmarked CloneSet")

// podsPerNode stays under kwok's 110-Pod node capacity.
const podsPerNode = 100

func BenchmarkInPlaceUpdate(b *testing.B) {
	n := *podCount
	ctx := context.Background()
	cluster := kwokcluster.StartForTest(b, kwokcluster.Options{Nodes: (n + podsPerNode - 1) / podsPerNode})
	c, err := harness.NewClient(cluster.RESTConfig)
	if err != nil {
		b.Fatal(err)
	}
	manager := startManagerProcess(b, cluster.Kubeconfig)

	ns := "bench"
	if err := cluster.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	maxUnavailable := intstr.FromString("100%")
	cs := &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: ptr.To(int32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "bench"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1"}}},
			},
			UpdateStrategy: stepwisev1.CloneSetUpdateStrategy{
				Type:           stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType,
				MaxUnavailable: &maxUnavailable,
			},
		},
	}
	if err := c.Create(ctx, cs); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	waitUpdatedReady(b, c, ns, int32(n), 1, 15*time.Minute)
	b.Logf("%d Pods created and ready in %s", n, time.Since(start).Round(time.Millisecond))

	// Only the manager writes Events and CloneSets while the update runs,
	// so its Pod writes are its transport total minus those two.
	eventsBefore, cloneSetsBefore := apiserverWrites(b, cluster, "events"), apiserverWrites(b, cluster, "clonesets")
	managerWritesBefore := manager.writes(b)
	b.ResetTimer()
	start = time.Now()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cs), cs); err != nil {
			return err
		}
		cs.Spec.Template.Spec.Containers[0].Image = "example.com/app:v2"
		return c.Update(ctx, cs)
	})
	if err != nil {
		b.Fatal(err)
	}
	waitUpdatedReady(b, c, ns, int32(n), 2, 15*time.Minute)
	elapsed := time.Since(start)
	b.StopTimer()

	managerWrites := manager.writes(b) - managerWritesBefore
	eventWrites := apiserverWrites(b, cluster, "events") - eventsBefore
	cloneSetWrites := apiserverWrites(b, cluster, "clonesets") - cloneSetsBefore
	podWrites := managerWrites - eventWrites - cloneSetWrites
	rss := manager.peakRSS(b)
	b.ReportMetric(elapsed.Seconds(), "s/all-updated-ready")
	b.ReportMetric(podWrites/float64(n), "pod-writes/pod")
	b.ReportMetric(managerWrites/float64(n), "all-writes/pod")
	b.ReportMetric(float64(rss)/(1<<20), "manager-peak-RSS-MiB")
	fmt.Printf("\nIn-place image update of %d Pods (maxUnavailable 100%%):\n"+
		"  wall time to all updated and ready: %s\n"+
		"  manager writes per Pod, all kinds (client transport): %.2f\n"+
		"    of which Pod writes: %.2f, Events: %.2f, CloneSet status: %.2f\n"+
		"  manager peak RSS: %.0f MiB\n",
		n, elapsed.Round(time.Millisecond), managerWrites/float64(n), podWrites/float64(n), eventWrites/float64(n), cloneSetWrites/float64(n), float64(rss)/(1<<20))
}

// waitUpdatedReady waits until every Pod runs the template with the given
// restart count, as the CloneSet's status reports it.
func waitUpdatedReady(b *testing.B, c client.Client, ns string, n int32, round int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var cs stepwisev1.CloneSet
	for time.Now().Before(deadline) {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "bench"}, &cs); err == nil &&
			cs.Status.ObservedGeneration == cs.Generation && cs.Status.UpdatedReadyReplicas == n && cs.Status.ReadyReplicas == n &&
			cs.Status.CurrentRevision == cs.Status.UpdateRevision {
			return
		}
		time.Sleep(100 * time.Millisecond) // the benchmark's own observation loop, not the controller's
	}
	b.Fatalf("round %d: not all %d Pods updated and ready after %s: %+v", round, n, timeout, cs.Status)
}

// apiserverWrites sums the API server's count of writes (POST, PUT, PATCH,
// DELETE) to one resource. The scheduler's bindings are left out.
func apiserverWrites(b *testing.B, cluster *kwokcluster.Cluster, resource string) float64 {
	raw, err := cluster.Clientset().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading apiserver metrics: %v", err)
	}
	var total float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="`+resource+`"`) ||
			strings.Contains(line, `subresource="binding"`) {
			continue
		}
		for _, verb := range []string{`verb="POST"`, `verb="PUT"`, `verb="PATCH"`, `verb="DELETE"`} {
			if strings.Contains(line, verb) {
				total += sampleValue(b, line)
			}
		}
	}
	return total
}

func sampleValue(b *testing.B, line string) float64 {
	fields := strings.Fields(line)
	v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
	if err != nil {
		b.Fatalf("parsing metric line %q: %v", line, err)
	}
	return v
}

type managerProcess struct {
	cmd        *exec.Cmd
	metricsURL string
}

// buildManager builds cmd/manager into a temporary binary called name (its
// user agent names it in the API server's audit log).
func buildManager(b *testing.B, name string) string {
	root, err := envtestenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	binary := filepath.Join(b.TempDir(), name)
	build := exec.Command("go", "build", "-o", binary, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building manager: %v\n%s", err, out)
	}
	return binary
}

// startManagerProcess builds and runs cmd/manager as its own process, so
// its memory is measured alone.
func startManagerProcess(b *testing.B, kubeconfig string) *managerProcess {
	binary := buildManager(b, "manager")
	metricsAddr, probeAddr := freeAddr(b), freeAddr(b)
	logFile, err := os.Create(filepath.Join(b.TempDir(), "manager.log"))
	if err != nil {
		b.Fatal(err)
	}
	// Plain HTTP metrics: the bench scrapes its own manager on loopback.
	cmd := exec.Command(binary, "--kubeconfig", kubeconfig, "--metrics-bind-address", metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address", probeAddr, "--cloneset-concurrency", "4", "--zap-log-level", "error")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting manager: %v", err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	m := &managerProcess{cmd: cmd, metricsURL: "http://" + metricsAddr + "/metrics"}
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get("http://" + probeAddr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("manager not ready after a minute; log in %s", logFile.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writes sums the manager's own client requests that change something.
func (m *managerProcess) writes(b *testing.B) float64 {
	resp, err := http.Get(m.metricsURL)
	if err != nil {
		b.Fatalf("scraping manager metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var total float64
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		for _, verb := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(line, verb) {
				total += sampleValue(b, line)
			}
		}
	}
	return total
}

// peakRSS reads the kernel's high-water mark of the manager's resident memory.
func (m *managerProcess) peakRSS(b *testing.B) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("reading manager memory: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kib, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kib << 10
		}
	}
	b.Fatal("no VmHWM in /proc status")
	return 0
}

// Ports for the controllers' listeners come from below the kernel's
// ephemeral range (32768-60999 by default). A port from "127.0.0.1:0" is an
// ephemeral one, and between our Close and the controller's Listen any
// outgoing connection on this busy machine (the API server's and kwok's
// clients, Prometheus's scrapes) may take it as its source port: a full-size
// run failed so ("bind: address already in use").
const (
	listenPortFirst = 20000
	listenPorts     = 12000
)

// nextListenPort walks the range from a random start, so that two
// addresses handed out in one run are never the same port.
var nextListenPort atomic.Int64

func init() { nextListenPort.Store(rand.Int64N(listenPorts)) }

// freeAddr is a loopback address on a port that nothing listens on now.
func freeAddr(b *testing.B) string {
	for range listenPorts {
		port := listenPortFirst + nextListenPort.Add(1)%listenPorts
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr
	}
	b.Fatalf("no free port on 127.0.0.1 from %d to %d", listenPortFirst, listenPortFirst+listenPorts-1)
	return ""
}
