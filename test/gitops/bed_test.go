package gitops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
	"github.com/stepwise-dev/stepwise/test/traffic"
)

const (
	// waitTimeout bounds one wait for a state; generous, since the machine
	// is shared (2 cores) with kwok, etcd, Prometheus and the tools.
	waitTimeout = 3 * time.Minute
	poll        = 250 * time.Millisecond
	// badTag is the release the simulator fails 20 % of requests for.
	badTag = "6.7.2"
)

// startingCluster serializes the start of the tools' clusters.
var startingCluster sync.Mutex

// bed is one kwok cluster with the Stepwise manager (internal/manager, as
// cmd/manager runs it, with the shipped RBAC), a traffic simulator for
// every Pod and Prometheus scraping it, and the GitOps tools' CRDs.
type bed struct {
	cluster *kwokcluster.Cluster
	client  client.Client
	prom    *promrunner.Prometheus
	bin     string
	root    string
}

func newBed(t *testing.T, assets ...string) *bed {
	t.Helper()
	if _, err := promrunner.Available(promrunner.Options{}); err != nil {
		t.Fatal(err)
	}
	root, err := envtestenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("STEPWISE_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	for _, f := range append(assets, "gitops-crds") {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("%v: run make gitops-assets", err)
		}
	}
	// One cluster starts at a time: two kwokctl clusters created at the same
	// moment were seen to take the same port.
	cluster := func() *kwokcluster.Cluster {
		startingCluster.Lock()
		// Unlocked also when StartForTest fails the test (runtime.Goexit).
		defer startingCluster.Unlock()
		return kwokcluster.StartForTest(t, kwokcluster.Options{Nodes: 1})
	}()
	if err := cluster.InstallCRDs(t.Context(), filepath.Join(bin, "gitops-crds")); err != nil {
		t.Fatal(err)
	}
	// Before the manager starts, which watches routes only if their CRD
	// exists then (story 6).
	if err := kwokcluster.InstallGatewayAPI(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	c, err := harness.NewClient(cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	managerCfg, err := shippedrbac.ManagerConfig(t.Context(), cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	m, err := harness.StartManager(context.Background(), managerCfg, manager.Options{
		LeaderElection: true, LeaderElectionNamespace: shippedrbac.Namespace,
	})
	if err != nil {
		t.Fatalf("starting manager: %v", err)
	}
	t.Cleanup(m.Stop)

	sim, err := traffic.Start(context.Background(), "127.0.0.1:0", traffic.Options{
		Client: c,
		ErrorRate: func(pod *corev1.Pod) float64 {
			if len(pod.Spec.Containers) > 0 && strings.HasSuffix(pod.Spec.Containers[0].Image, ":"+badTag) {
				return traffic.BadErrorRate
			}
			return 0
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	prom, err := promrunner.Start(ctx, []string{sim.Addr()}, promrunner.Options{ScrapeInterval: time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	return &bed{cluster: cluster, client: c, prom: prom, bin: bin, root: root}
}

// eventually polls cond until it returns true, failing the test with the
// last reason after waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		if why != last {
			last = why
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after %s; last seen: %s", what, waitTimeout, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-time.After(poll):
		}
	}
}

func (b *bed) get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// app is the CloneSet web and its Rollout in namespace shop, as the
// examples name them.
type appState struct {
	phase      stepwisev1.RolloutPhase
	step       string
	reason     string
	stable     string
	update     string
	pods       map[string]int
	restarts   map[string]int32
	rolloutErr error
	// kstatus's inputs: the Rollout's and the CloneSet's Reconciling and
	// Stalled conditions ("R" and "S" when True).
	rolloutConds, cloneSetConds string
	// route is what HTTPRoute web's rule app sends where ("" without the
	// route); canaryWeight the weight of web-canary in it (0 when absent).
	route        string
	canaryWeight int64
	// trafficConflict is the Rollout's TrafficConflict message while True.
	trafficConflict string
}

// promoted: the Rollout is Healthy on the CloneSet's update revision.
func (s appState) promoted() bool {
	return s.rolloutErr == nil && s.phase == stepwisev1.RolloutHealthy && s.stable != "" && s.stable == s.update
}

func (s appState) String() string {
	if s.rolloutErr != nil {
		return "rollout: " + s.rolloutErr.Error()
	}
	images := make([]string, 0, len(s.pods))
	for img, n := range s.pods {
		images = append(images, fmt.Sprintf("%s=%d", img[strings.LastIndex(img, ":")+1:], n))
	}
	sort.Strings(images)
	stable := "stable"
	if s.stable != s.update {
		stable = "new revision"
	}
	line := fmt.Sprintf("rollout %s step %s (%s, %s)%s cloneset%s pods [%s]", s.phase, s.step, s.reason, stable, s.rolloutConds, s.cloneSetConds, strings.Join(images, " "))
	if s.route != "" {
		line += " route " + s.route
	}
	if s.trafficConflict != "" {
		line += " [TrafficConflict " + s.trafficConflict + "]"
	}
	return line
}

func (b *bed) app(ctx context.Context, ns string) appState {
	var s appState
	ro := &stepwisev1.Rollout{}
	if err := b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ro); err != nil {
		s.rolloutErr = err
	} else {
		s.phase, s.reason, s.stable = ro.Status.Phase, ro.Status.Reason, ro.Status.StableRevision
		s.rolloutConds = kconds(ro.Status.Conditions)
		s.step = "-"
		if ro.Status.CurrentStepIndex != nil {
			s.step = fmt.Sprint(*ro.Status.CurrentStepIndex + 1)
		}
		if c := apimeta.FindStatusCondition(ro.Status.Conditions, stepwisev1.TrafficConflictCondition); c != nil && c.Status == metav1.ConditionTrue {
			s.trafficConflict = c.Message
		}
	}
	if r, err := b.get(ctx, httpRouteGVK, ns, "web"); err == nil {
		s.route, s.canaryWeight = routeBackends(r)
	}
	cs := &stepwisev1.CloneSet{}
	if err := b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, cs); err == nil {
		s.update = cs.Status.UpdateRevision
		s.cloneSetConds = kconds(cs.Status.Conditions)
	}
	var pods corev1.PodList
	s.pods, s.restarts = map[string]int{}, map[string]int32{}
	if err := b.client.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			if len(p.Spec.Containers) > 0 {
				s.pods[p.Spec.Containers[0].Image]++
			}
			for _, st := range p.Status.ContainerStatuses {
				s.restarts[p.Name] += st.RestartCount
			}
		}
	}
	return s
}

// onlyImage: every one of n Pods runs image.
func (s appState) onlyImage(image string, n int) bool {
	return len(s.pods) == 1 && s.pods[image] == n
}

// sample is one moment of a story: what git, the tool, the Rollout and
// the Pods said.
type sample struct {
	at     time.Time
	commit string
	tool   toolStatus
	app    appState
}

// toolStatus is the tool's verdict on the app: Ready (Flux) or Healthy
// (Argo CD) for the revision applied.
type toolStatus struct {
	ready    bool   // Kustomization Ready=True / Application Synced and Healthy
	revision string // the git commit the verdict is about
	// settledBad: the tool reports a failure or a difference from git
	// (Flux Ready=False, Argo CD OutOfSync or not Healthy); Flux's
	// Ready=Unknown while each interval's reconcile runs is not one.
	settledBad bool
	text       string
	// pass changes each time the tool starts applying git again (Flux: a
	// reconcile starts) or compares with it (Argo CD: reconciledAt); it is
	// not part of the timeline.
	pass string
}

// recorder samples the tool and the app while a story runs, keeping the
// moments that differ from the one before: the story's timeline.
type recorder struct {
	mu      sync.Mutex
	samples []sample
	// passes are the moments the tool's pass changed.
	passes   []time.Time
	lastPass string
	commit   string
	stop     chan struct{}
	done     chan struct{}
}

func record(t *testing.T, b *bed, ns string, tool func(context.Context) toolStatus) *recorder {
	r := &recorder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			// The tool first: when it says Ready, the Rollout read after it
			// cannot be further back in its release than it was then.
			ts := tool(t.Context())
			s := sample{at: time.Now(), tool: ts, app: b.app(t.Context(), ns)}
			r.mu.Lock()
			s.commit = r.commit
			if ts.pass != "" && ts.pass != r.lastPass {
				r.lastPass = ts.pass
				r.passes = append(r.passes, s.at)
			}
			if n := len(r.samples); n == 0 || r.samples[n-1].line() != s.line() {
				r.samples = append(r.samples, s)
			}
			r.mu.Unlock()
			select {
			case <-r.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(r.end)
	return r
}

func (s sample) line() string {
	return fmt.Sprintf("git %s | tool %s | %s", short(s.commit), s.tool.text, s.app)
}

func short(h string) string {
	if len(h) > 7 {
		return h[:7]
	}
	return h
}

// committed marks the moment git's HEAD became commit.
func (r *recorder) committed(commit string) {
	r.mu.Lock()
	r.commit = commit
	r.mu.Unlock()
}

func (r *recorder) end() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// since returns the samples taken from t0 on.
func (r *recorder) since(t0 time.Time) []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.samples), func(i int) bool { return !r.samples[i].at.Before(t0) })
	return slices.Clone(r.samples[i:])
}

// passesBetween counts the tool's passes from a to b.
func (r *recorder) passesBetween(a, b time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.passes {
		if p.After(a) && !p.After(b) {
			n++
		}
	}
	return n
}

func logTimeline(t *testing.T, samples []sample) {
	t.Helper()
	if len(samples) == 0 {
		return
	}
	var sb strings.Builder
	t0 := samples[0].at
	for _, s := range samples {
		fmt.Fprintf(&sb, "\n  +%6.1fs  %s", s.at.Sub(t0).Seconds(), s.line())
	}
	t.Logf("timeline:%s", sb.String())
}

// condition returns the status, reason and message of a condition of u.
func condition(u *unstructured.Unstructured, typ string) (string, string, string) {
	m := conditionMap(u, typ)
	s, _ := m["status"].(string)
	r, _ := m["reason"].(string)
	msg, _ := m["message"].(string)
	return s, r, msg
}

func conditionMap(u *unstructured.Unstructured, typ string) map[string]any {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range raw {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// kconds shows the conditions kstatus reads: [R] Reconciling, [S] Stalled,
// with the reason.
func kconds(conds []metav1.Condition) string {
	out := ""
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch c.Type {
		case "Reconciling":
			out += " [R " + c.Reason + "]"
		case "Stalled":
			out += " [S " + c.Reason + "]"
		}
	}
	return out
}
