package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
	"github.com/stepwise-dev/stepwise/test/harness"
)

const (
	timeout = 20 * time.Second
	poll    = 100 * time.Millisecond
	// promAddress is the address Rollouts name; the injected provider
	// factory sends it to the fake Prometheus.
	promAddress = "http://prometheus.monitoring:9090"
)

// startController runs the shipped manager with the Rollout controller
// alone (the tests play the workload controllers), as the manager's
// ServiceAccount, its cache limited to namespace ns, until the test ends or
// Stop is called. opts change the manager's options (such as
// AnalysisAddresses) before it starts.
// managerSetup is what a test may change of the manager startController runs:
// its options and its hooks.
type managerSetup struct {
	manager.Options
	hooks manager.Hooks
}

func startController(t *testing.T, ns string, opts ...func(*managerSetup)) *harness.Manager {
	t.Helper()
	s := managerSetup{
		Options: manager.Options{
			Controllers: []string{manager.RolloutController},
			Namespaces:  []string{ns},
		},
		hooks: manager.Hooks{ProviderFactory: fakeProviderFactory},
	}
	for _, opt := range opts {
		opt(&s)
	}
	m, err := harness.StartManagerWithHooks(context.Background(), env.managerCfg, s.Options, s.hooks)
	if err != nil {
		t.Fatalf("starting manager: %v", err)
	}
	t.Cleanup(m.Stop)
	return m
}

// fakeProviderFactory keeps the real Prometheus client and only points the
// address Rollouts use in tests at the fake server; any other address (an
// unreachable one) is used as is.
func fakeProviderFactory(m stepwisev1.PrometheusMetric, refs rollout.ResolvedRefs, limits rollout.ProviderLimits) (analysis.Provider, error) {
	if m.Address == promAddress {
		m.Address = env.prom.srv.URL
		// The allow-list judged the address as written.
		limits.Allow = prometheus.AllowList{}
	}
	return rollout.DefaultProviderFactory(m, refs, limits)
}

// unreachableAddress is a local address nothing listens on.
func unreachableAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return (&url.URL{Scheme: "http", Host: addr}).String()
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rollout-"}}
	if err := env.client.Create(testContext(t), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// --- workloads ---

func image(version string) string { return "registry.example.com/web:" + version }

// revisionOf names a template's revision after its image tag, so tests read
// as git history: web-1-0-0, web-2-0-0.
func revisionOf(name string, spec corev1.PodSpec) string {
	tag := spec.Containers[0].Image[strings.LastIndex(spec.Containers[0].Image, ":")+1:]
	return name + "-" + strings.ReplaceAll(tag, ".", "-")
}

func newCloneSet(ns, name string, replicas int32, version string) *stepwisev1.CloneSet {
	labels := map[string]string{"app": name}
	return &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image(version)}}},
			},
		},
	}
}

func createCloneSet(t *testing.T, cs *stepwisev1.CloneSet) {
	t.Helper()
	if err := env.client.Create(testContext(t), cs); err != nil {
		t.Fatalf("creating CloneSet: %v", err)
	}
}

// commit changes the CloneSet's image as a git commit applied by a GitOps
// tool would: a merge patch of the template only.
func commit(t *testing.T, ns, name, version string) {
	t.Helper()
	cs := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	body := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, image(version))
	if err := env.client.Patch(testContext(t), cs, client.RawPatch(types.MergePatchType, []byte(body)), client.FieldOwner("git")); err != nil {
		t.Fatalf("committing %s: %v", version, err)
	}
}

func getCloneSet(t *testing.T, ns, name string) *stepwisev1.CloneSet {
	t.Helper()
	cs := &stepwisev1.CloneSet{}
	if err := env.client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: name}, cs); err != nil {
		t.Fatalf("getting CloneSet: %v", err)
	}
	return cs
}

// reportCloneSet writes the CloneSet's status as its controller would:
// observedGeneration current, and what f sets.
func reportCloneSet(t *testing.T, ns, name string, f func(cs *stepwisev1.CloneSet)) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		cs := getCloneSet(t, ns, name)
		cs.Status.ObservedGeneration = cs.Generation
		cs.Status.Replicas = *cs.Spec.Replicas
		f(cs)
		// What the CloneSet applies of its Rollout's grant, as it stands.
		gov, err := governedPartition(testContext(t), cs, cs.Status.UpdateRevision)
		if err != nil {
			return err
		}
		cs.Status.Rollout = gov
		return env.client.Status().Update(testContext(t), cs)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// --- rollouts ---

type stepOpt func(*stepwisev1.RolloutStep)

func pauseFor(d time.Duration) stepOpt {
	return func(s *stepwisev1.RolloutStep) {
		s.Pause = &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: d}}
	}
}

func pauseForPromote() stepOpt {
	return func(s *stepwisev1.RolloutStep) { s.Pause = &stepwisev1.StepPause{} }
}

func skipAnalysis() stepOpt {
	return func(s *stepwisev1.RolloutStep) { s.Analysis = &stepwisev1.StepAnalysis{Skip: true} }
}

func stepAt(partition intstr.IntOrString, opts ...stepOpt) stepwisev1.RolloutStep {
	s := stepwisev1.RolloutStep{Partition: partition}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func pct(p string) intstr.IntOrString { return intstr.FromString(p) }
func num(n int32) intstr.IntOrString  { return intstr.FromInt32(n) }

// errorRate is the analysis the tests use: one query an interval apart,
// passing under 0.01.
// Its window grows with the canary and the fake Prometheus answers at
// once, so the first measurement is due a 1s scrape margin after the
// canary's readiness (see rollout_window_test.go for the wait itself).
func errorRate(count int32) *stepwisev1.AnalysisSpec {
	return &stepwisev1.AnalysisSpec{
		Interval:     &metav1.Duration{Duration: time.Second},
		Count:        &count,
		ScrapeMargin: &metav1.Duration{Duration: time.Second},
		Metrics: []stepwisev1.Metric{{
			Name: "error-rate",
			Prometheus: &stepwisev1.PrometheusMetric{
				Address: promAddress,
				Query:   `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[{{ .CanaryAge }}]))`,
			},
			ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
		}},
	}
}

func newRollout(ns, name string, ref stepwisev1.WorkloadReference, steps ...stepwisev1.RolloutStep) *stepwisev1.Rollout {
	return &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       stepwisev1.RolloutSpec{WorkloadRef: ref, Steps: steps},
	}
}

func cloneSetRef(name string) stepwisev1.WorkloadReference {
	return stepwisev1.WorkloadReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: name}
}

func createRollout(t *testing.T, ro *stepwisev1.Rollout) {
	t.Helper()
	if err := env.client.Create(testContext(t), ro); err != nil {
		t.Fatalf("creating Rollout: %v", err)
	}
}

func getRollout(t *testing.T, ns, name string) *stepwisev1.Rollout {
	t.Helper()
	ro := &stepwisev1.Rollout{}
	if err := env.client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: name}, ro); err != nil {
		t.Fatalf("getting Rollout: %v", err)
	}
	return ro
}

// updateRollout changes a Rollout, retrying on conflicts.
func updateRollout(t *testing.T, ns, name string, f func(*stepwisev1.Rollout)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		ro := getRollout(t, ns, name)
		f(ro)
		return env.client.Update(testContext(t), ro)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// annotate writes a request annotation with a fresh token, as the kubectl
// plugin does, and returns the token.
func annotate(t *testing.T, ns, name, key string) string {
	t.Helper()
	token := time.Now().UTC().Format(time.RFC3339Nano)
	updateRollout(t, ns, name, func(ro *stepwisev1.Rollout) {
		if ro.Annotations == nil {
			ro.Annotations = map[string]string{}
		}
		ro.Annotations[key] = token
	})
	return token
}

// eventually waits until check passes on the Rollout.
func eventually(t *testing.T, ns, name string, check func(g Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	t.Helper()
	var last *stepwisev1.Rollout
	NewWithT(t).Eventually(func(g Gomega) {
		last = getRollout(t, ns, name)
		check(g, last)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), func() string { return describe(last) })
	return last
}

// consistently checks the Rollout for d.
func consistently(t *testing.T, ns, name string, d time.Duration, check func(g Gomega, ro *stepwisev1.Rollout)) {
	t.Helper()
	var last *stepwisev1.Rollout
	NewWithT(t).Consistently(func(g Gomega) {
		last = getRollout(t, ns, name)
		check(g, last)
	}).WithTimeout(d).WithPolling(poll).Should(Succeed(), func() string { return describe(last) })
}

func describe(ro *stepwisev1.Rollout) string {
	if ro == nil {
		return "no Rollout read"
	}
	b, _ := json.MarshalIndent(ro.Status, "", "  ")
	return "Rollout status:\n" + string(b)
}

func stepIs(g Gomega, ro *stepwisev1.Rollout, i int32) {
	g.Expect(ro.Status.CurrentStepIndex).NotTo(BeNil(), "no step in progress")
	g.Expect(*ro.Status.CurrentStepIndex).To(Equal(i))
}

func condition(ro *stepwisev1.Rollout, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(ro.Status.Conditions, typ)
}

// kstatusHealthy: Ready=True, no Reconciling, no Stalled, generation observed.
func kstatusHealthy(g Gomega, ro *stepwisev1.Rollout) {
	g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
	g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
	g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, meta.ReadyCondition)).To(BeTrue(), "Ready")
	g.Expect(condition(ro, meta.ReconcilingCondition)).To(BeNil(), "Reconciling")
	g.Expect(condition(ro, meta.StalledCondition)).To(BeNil(), "Stalled")
}

// kstatusProgressing: Ready=False, Reconciling=True, no Stalled.
func kstatusProgressing(g Gomega, ro *stepwisev1.Rollout) {
	g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
	g.Expect(apimeta.IsStatusConditionFalse(ro.Status.Conditions, meta.ReadyCondition)).To(BeTrue(), "Ready=False")
	g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, meta.ReconcilingCondition)).To(BeTrue(), "Reconciling=True")
	g.Expect(condition(ro, meta.StalledCondition)).To(BeNil(), "Stalled")
}

// kstatusStalled: Ready=False, Stalled=True, no Reconciling.
func kstatusStalled(g Gomega, ro *stepwisev1.Rollout) {
	g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
	g.Expect(apimeta.IsStatusConditionFalse(ro.Status.Conditions, meta.ReadyCondition)).To(BeTrue(), "Ready=False")
	g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, meta.StalledCondition)).To(BeTrue(), "Stalled=True")
	g.Expect(condition(ro, meta.ReconcilingCondition)).To(BeNil(), "Reconciling")
}

// events lists the Events recorded on a Rollout with reason.
func events(t *testing.T, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := env.client.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing Events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Rollout" && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitForEvent waits for an Event with reason whose note contains every part.
func waitForEvent(t *testing.T, ns, name, reason string, parts ...string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	NewWithT(t).Eventually(func() error {
		for _, e := range events(t, ns, name, reason) {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(e.Note, p)
			}
			if ok {
				found = e
				return nil
			}
		}
		return errors.New("no " + reason + " Event with " + strings.Join(parts, ", "))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return found
}

// measurementsOf counts a Rollout's stored measurements by step.
func measurementsOf(ro *stepwisev1.Rollout) map[int32]int {
	out := map[int32]int{}
	for _, m := range ro.Status.Measurements {
		out[m.Step]++
	}
	return out
}

// occurrences counts the times Events were recorded: the events API folds
// repeats of an Event into one object with a series count.
func occurrences(evs []eventsv1.Event) int {
	n := 0
	for _, e := range evs {
		if e.Series != nil && e.Series.Count > 1 {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// withNote keeps the Events whose note contains part.
func withNote(evs []eventsv1.Event, part string) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range evs {
		if strings.Contains(e.Note, part) {
			out = append(out, e)
		}
	}
	return out
}

// releasePromoted creates ro, waits until it is Healthy, commits version to
// its CloneSet and returns the Rollout once it has promoted revision.
func releasePromoted(t *testing.T, ro *stepwisev1.Rollout, version, revision string) *stepwisev1.Rollout {
	t.Helper()
	createRollout(t, ro)
	eventually(t, ro.Namespace, ro.Name, func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	commit(t, ro.Namespace, ro.Spec.WorkloadRef.Name, version)
	return eventually(t, ro.Namespace, ro.Name, func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal(revision))
	})
}
