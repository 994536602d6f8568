package e2e

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// chaosKills is the least number of times the manager is killed during
// the release.
const chaosKills = 10

// TestChaos kills the manager (SIGKILL, no goodbye) at random moments, at
// least chaosKills times, while a Rollout with analysis walks a 200-Pod
// CloneSet through its steps, and starts it again each time. Whatever the
// moments, at the end every Pod runs the new image and is ready, none was
// recreated, no container restarted twice for the one update, and the
// Rollout is Healthy with a coherent status. The seed is printed; set
// STEPWISE_CHAOS_SEED to replay a run.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster, Prometheus and the manager binary")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("STEPWISE_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("STEPWISE_CHAOS_SEED: %v", err)
		}
	}
	t.Logf("chaos seed %d (replay with STEPWISE_CHAOS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	g := NewWithT(t)
	e := newRolloutEnvOn(t, newBedWithoutManager(t, 3))
	mgr := newManagerProcess(t, e.managerCfg)
	mgr.start(t)
	t.Cleanup(mgr.stop)

	const replicas = 200
	s := e.newStory(t, "chaos", storyOptions{replicas: replicas, spec: stepwisev1.RolloutSpec{
		Steps: []stepwisev1.RolloutStep{step("90%", noPause), step("50%", noPause), step("0", noPause)},
		Analysis: &stepwisev1.AnalysisSpec{
			Interval: &metav1.Duration{Duration: time.Second},
			Count:    ptr.To[int32](2),
			// Three scrape intervals, the documented floor for a window
			// that grows with the canary: its first [3s] still holds two
			// samples when a scrape is late on this busy machine.
			ScrapeMargin: &metav1.Duration{Duration: 3 * time.Second},
			Metrics: []stepwisev1.Metric{{
				Name: errorRateMetric,
				Prometheus: &stepwisev1.PrometheusMetric{Address: e.prom.URL(), Timeout: &metav1.Duration{Duration: 2 * time.Second},
					Query: `(sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[{{ .CanaryAge }}])) or vector(0))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))`},
				ThresholdRange: &stepwisev1.ThresholdRange{Max: errorRateMax},
			}},
		},
	}})
	before := s.original

	canary := s.commit("1.1.0")
	done := make(chan struct{})
	kills := make(chan int, 1)
	go func() {
		n := 0
		defer func() { kills <- n }()
		for {
			select {
			case <-done:
				if n >= chaosKills {
					return
				}
			case <-time.After(time.Duration(500+rng.IntN(3500)) * time.Millisecond):
			}
			mgr.kill(t)
			n++
			// A short while dead, as a crash-looping Pod would be.
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			mgr.start(t)
		}
	}()
	healthy := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy), ro.Status.Message)
		g.Expect(ro.Status.StableRevision).To(Equal(canary))
	}
	s.waitFor("Healthy on the new revision through the kills", 10*time.Minute, healthy)
	close(done)
	t.Logf("manager killed %d times", <-kills)

	// The last manager runs on; the end state holds and is coherent.
	ro := s.waitFor("Healthy and settled", 5*time.Minute, func(g Gomega, ro *stepwisev1.Rollout) {
		healthy(g, ro)
		g.Expect(ro.Status.CanaryRevision).To(BeEmpty())
		g.Expect(ro.Status.CurrentStepIndex).To(BeNil())
		g.Expect(ro.Status.Analysis).To(BeNil())
		g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
		status, reason, _ := condition(ro, meta.ReadyCondition)
		g.Expect([]string{string(status), reason}).To(Equal([]string{"True", stepwisev1.ReasonStable}))
		status, _, _ = condition(ro, meta.StalledCondition)
		g.Expect(status).To(BeEmpty())
		g.Expect(ro.Status.PartitionGrant).To(Equal(&stepwisev1.PartitionGrant{Revision: canary, Partition: intstr.FromInt32(0)}))
	})
	for _, m := range ro.Status.Measurements {
		g.Expect(m.Phase).To(Equal(stepwisev1.MeasurementSuccessful), "measurement %+v", m)
	}
	g.Eventually(func(g Gomega) {
		pods := e.pods(g, s.ns)
		g.Expect(snapshot(pods)).To(Equal(before), "no Pod recreated: same names, UIDs, IPs and nodes")
		for _, p := range pods {
			g.Expect(imageOf(&p, "app")).To(Equal(webImage("1.1.0")), "pod %s", p.Name)
			g.Expect(podCondition(&p, corev1.PodReady)).To(Equal(corev1.ConditionTrue), "pod %s ready", p.Name)
			g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(1), "pod %s restarted once for the one update", p.Name)
		}
	}, 5*time.Minute, time.Second).Should(Succeed())
	e.waitSettled(t, s.ns, "web", replicas, replicas, settleTimeout)
	e.waitCurrentRevision(t, s.ns, "web", canary)
}

// managerProcess runs the manager binary as its ServiceAccount, as a
// Deployment would, without leader election: a killed process holds
// nothing the next one waits for.
type managerProcess struct {
	bin, kubeconfig string
	mu              sync.Mutex
	cmd             *exec.Cmd
}

func newManagerProcess(t *testing.T, cfg *rest.Config) *managerProcess {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager: %v\n%s", err, out)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kwok"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData,
		CertificateAuthority: cfg.CAFile, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["manager"] = &clientcmdapi.Context{Cluster: "kwok", AuthInfo: "manager"}
	kc.CurrentContext = "manager"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return &managerProcess{bin: bin, kubeconfig: path}
}

func (m *managerProcess) start(t *testing.T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cmd := exec.Command(m.bin, "--kubeconfig", m.kubeconfig, "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=error")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Errorf("starting the manager: %v", err)
		return
	}
	m.cmd = cmd
}

// kill sends SIGKILL and reaps the process.
func (m *managerProcess) kill(t *testing.T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Logf("killing the manager: %v", err)
	}
	_ = m.cmd.Wait()
	m.cmd = nil
}

func (m *managerProcess) stop() {
	m.mu.Lock()
	cmd := m.cmd
	m.cmd = nil
	m.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}
