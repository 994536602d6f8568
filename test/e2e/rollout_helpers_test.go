package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
	"github.com/stepwise-dev/stepwise/test/promrunner"
	"github.com/stepwise-dev/stepwise/test/traffic"
)

// Timings of the Rollout stories. A step costs the in-place update of its
// canaries (about a second with restart delay "0"), its pause, and an
// analysis of `count` measurements `interval` apart (the controller counts
// an interval from the end of the second the last one was stored in, so two
// measurements are 1-2 s apart).
const (
	// rolloutTimeout bounds one wait for a Rollout state; generous because
	// the machine has two cores shared with kwok, etcd and Prometheus.
	rolloutTimeout = 60 * time.Second
	rolloutPoll    = 200 * time.Millisecond
	// stepPause is the timed pause of the analysed steps.
	stepPause = 3 * time.Second
	// holdFor is how long "stays as it is" is checked.
	holdFor = 3 * time.Second

	errorRateMetric = "error-rate"
	// errorRateMax is the threshold: a good canary serves exactly no 500
	// (the simulator is deterministic), a bad one 20 %.
	errorRateMax = "0.01"
)

// errorRateQuery is the share of the canary Pods' requests that failed in
// the last 10 s. The simulator writes both code series of a Pod (at 0 or
// more) from its first tick, and keeps them while the Pod does not serve,
// so for any canary that has been scraped twice both sums exist: no `or
// vector(0)` is needed, and none is wanted, since it would turn "no data"
// (Pods that get no traffic) into a passing 0. The Rollout takes its first
// measurement 10 s (the window) plus the scrape margin after the canaries
// were ready, so the window holds their own traffic only.
const errorRateQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[10s]))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[10s]))`

// noTrafficLabel on a Pod template keeps the simulator away from its Pods:
// they serve, but nobody calls them, so Prometheus has no series for them.
const noTrafficLabel = "e2e.stepwise.dev/traffic"

// webImage is the app image at a version; a version ending in "-bad" makes
// the simulator fail 20 % of the Pod's requests (traffic.DefaultErrorRate).
func webImage(version string) string { return "example.com/web:" + version }

// rolloutEnv is what every Rollout story shares: one kwok cluster with the
// manager, one traffic simulator for every namespace, one Prometheus
// scraping it.
type rolloutEnv struct {
	*bed
	// watcher watches Rollouts and CloneSets for the recorders.
	watcher client.WithWatch
	sim     *traffic.Simulator
	prom    *promrunner.Prometheus
	promAPI promv1.API
	rates   *errorRates
}

func newRolloutEnv(t *testing.T) *rolloutEnv {
	t.Helper()
	// Fail rather than skip, as a missing kwok binary does: a skipped story
	// reads as a passed one in CI.
	if _, err := promrunner.Available(promrunner.Options{}); err != nil {
		t.Fatal(err)
	}
	return newRolloutEnvOn(t, newBed(t, 2))
}

// newRolloutEnvOn adds the traffic simulator and Prometheus to a bed.
func newRolloutEnvOn(t *testing.T, b *bed) *rolloutEnv {
	t.Helper()
	if _, err := promrunner.Available(promrunner.Options{}); err != nil {
		t.Fatal(err)
	}
	scheme, err := harness.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(b.cluster.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rates := &errorRates{}
	noTraffic, err := labels.Parse(noTrafficLabel + "!=off")
	if err != nil {
		t.Fatal(err)
	}
	// Every namespace: each story has its own, and the query selects it.
	sim, err := traffic.Start(context.Background(), "127.0.0.1:0", traffic.Options{
		Client:    b.client,
		Selector:  noTraffic,
		ErrorRate: rates.rate,
		Logf:      t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	startCtx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	prom, err := promrunner.Start(startCtx, []string{sim.Addr()}, promrunner.Options{ScrapeInterval: time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	pc, err := promapi.NewClient(promapi.Config{Address: prom.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return &rolloutEnv{bed: b, watcher: wc, sim: sim, prom: prom, promAPI: promv1.NewAPI(pc), rates: rates}
}

// errorRates lets a story override, for its namespace, the error rate the
// simulator gives Pods; others keep traffic.DefaultErrorRate.
type errorRates struct {
	// byNamespace holds a func(*corev1.Pod) float64 per namespace.
	byNamespace sync.Map
}

func (r *errorRates) rate(pod *corev1.Pod) float64 {
	if v, ok := r.byNamespace.Load(pod.Namespace); ok {
		return v.(func(*corev1.Pod) float64)(pod)
	}
	return traffic.DefaultErrorRate(pod)
}

// set gives every Pod of ns the error rate.
func (r *errorRates) set(ns string, rate float64) {
	r.setFunc(ns, func(*corev1.Pod) float64 { return rate })
}

// setFunc gives each Pod of ns the error rate f returns for it.
func (r *errorRates) setFunc(ns string, f func(*corev1.Pod) float64) { r.byNamespace.Store(ns, f) }

// unreachableAddress is an http URL on a 127.0.0.1 port just closed, so
// that connecting is refused at once.
func unreachableAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// errorRateAnalysis asks address for the canary error rate: two
// measurements a second apart, the first failed one fails the step.
func errorRateAnalysis(address string) *stepwisev1.AnalysisSpec {
	return &stepwisev1.AnalysisSpec{
		Interval:     &metav1.Duration{Duration: time.Second},
		Count:        ptr.To[int32](2),
		FailureLimit: ptr.To[int32](0),
		// Prometheus scrapes every second.
		ScrapeMargin: &metav1.Duration{Duration: 2 * time.Second},
		Metrics: []stepwisev1.Metric{{
			Name: errorRateMetric,
			Prometheus: &stepwisev1.PrometheusMetric{
				Address: address,
				Query:   errorRateQuery,
				Timeout: &metav1.Duration{Duration: 2 * time.Second},
			},
			ThresholdRange: &stepwisev1.ThresholdRange{Max: errorRateMax},
		}},
	}
}

// step builds a spec.steps entry; pause < 0 is no pause, 0 a pause without
// duration (wait for a promote).
func step(partition string, pause time.Duration) stepwisev1.RolloutStep {
	s := stepwisev1.RolloutStep{Partition: intstr.Parse(partition)}
	switch {
	case pause == 0:
		s.Pause = &stepwisev1.StepPause{}
	case pause > 0:
		s.Pause = &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: pause}}
	}
	return s
}

const noPause = -1

// skipAnalysis marks a step that runs no analysis.
func skipAnalysis(s stepwisev1.RolloutStep) stepwisev1.RolloutStep {
	s.Analysis = &stepwisev1.StepAnalysis{Skip: true}
	return s
}

// story is one Rollout story in its own namespace: a CloneSet "web" and a
// Rollout "web" driving it, watched from the start.
type story struct {
	e   *rolloutEnv
	t   *testing.T
	ns  string
	rec *recorder
	// stable is the CloneSet's first revision, the one the Rollout adopts.
	stable string
	// original is every Pod as first created, to prove in-place updates.
	original map[string]podSnapshot
}

type storyOptions struct {
	replicas int32
	// labels are added to the Pod template (not to the selector).
	labels map[string]string
	spec   stepwisev1.RolloutSpec
	// templates are created in the story's namespace before the Rollout.
	templates []stepwisev1.AnalysisTemplate
}

// newStory creates a CloneSet on 1.0.0, waits for its Pods, then creates the
// Rollout and waits until it adopted that revision as stable and armed the
// partition at 100%.
func (e *rolloutEnv) newStory(t *testing.T, prefix string, o storyOptions) *story {
	t.Helper()
	g := NewWithT(t)
	ns := e.namespace(t, prefix)
	s := &story{e: e, t: t, ns: ns, rec: e.record(t, ns)}
	// Every story changes the CloneSet only as git would (the template, the
	// replicas) and leaves the partition to the Rollout: a conflict raised
	// at any moment would be a false alarm.
	t.Cleanup(func() {
		if seen := s.rec.conditionMessages(stepwisev1.PartitionConflictCondition); len(seen) > 0 {
			t.Errorf("%s raised though only the Rollout writes the partition: %q", stepwisev1.PartitionConflictCondition, seen)
		}
	})

	cs := cloneSet(ns, "web", o.replicas, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Spec.Containers[0].Image = webImage("1.0.0")
	// Restart at once: the stories are about steps, not restart delays.
	cs.Spec.Template.Annotations = map[string]string{kwokcluster.AnnotationRestartDelay: "0"}
	for k, v := range o.labels {
		cs.Spec.Template.Labels[k] = v
	}
	g.Expect(e.client.Create(t.Context(), cs)).To(Succeed())
	settled := e.waitSettled(t, ns, "web", o.replicas, o.replicas, settleTimeout)
	s.stable = settled.Status.UpdateRevision
	s.original = snapshot(e.pods(g, ns))

	if o.labels[noTrafficLabel] != "off" {
		s.waitRates(int(o.replicas))
	}

	for _, tmpl := range o.templates {
		tmpl.Namespace = ns
		g.Expect(e.client.Create(t.Context(), &tmpl)).To(Succeed())
	}
	o.spec.WorkloadRef = stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"}
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: o.spec}
	g.Expect(e.client.Create(t.Context(), ro)).To(Succeed())
	s.waitRollout("adopts the running revision and governs the CloneSet", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(s.stable))
		g.Expect(s.partition(g)).To(Equal("0"), "every Pod may run the stable revision")
	})
	return s
}

// commitWeb changes the image of CloneSet web in ns to webImage(version),
// as a git commit applied by a GitOps tool would, and returns the
// CloneSet's new update revision (read once the CloneSet has seen the new
// image, never a revision from before it).
func (b *bed) commitWeb(t *testing.T, ns, version string) string {
	t.Helper()
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = webImage(version) })
	var rev string
	NewWithT(t).Eventually(func(g Gomega) {
		cs := b.get(g, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Spec.Template.Spec.Containers[0].Image).To(Equal(webImage(version)))
		rev = cs.Status.UpdateRevision
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	return rev
}

// requestWeb writes a request annotation (promote-at, retry-at, ...) on
// Rollout web in ns with a timestamp token, as `kubectl stepwise` does,
// and returns the token.
func (b *bed) requestWeb(t *testing.T, ns, annotation string) string {
	t.Helper()
	token := time.Now().UTC().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotation, token)
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	if err := b.client.Patch(t.Context(), ro, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("requesting %s: %v", annotation, err)
	}
	return token
}

// rolloutWeb reads Rollout web in ns.
func (b *bed) rolloutWeb(g Gomega, ns string) *stepwisev1.Rollout {
	ro := &stepwisev1.Rollout{}
	g.Expect(b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, ro)).To(Succeed())
	return ro
}

// waitRolloutWeb waits up to timeout until check passes on Rollout web in
// ns; a failure prints the last status read.
func (b *bed) waitRolloutWeb(t *testing.T, ns, what string, timeout time.Duration, check func(g Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	t.Helper()
	var last *stepwisev1.Rollout
	NewWithT(t).Eventually(func(g Gomega) {
		last = b.rolloutWeb(g, ns)
		check(g, last)
	}, timeout, rolloutPoll).Should(Succeed(), func() string { return what + "\n" + describeRollout(last) })
	return last
}

// commit changes the app image, as a git commit applied by a GitOps tool
// would, and returns the CloneSet's new update revision.
func (s *story) commit(version string) string {
	s.t.Helper()
	return s.e.commitWeb(s.t, s.ns, version)
}

// request writes a request annotation (promote-at, retry-at, ...) with a
// timestamp token, as `kubectl stepwise` does, and returns the token.
func (s *story) request(annotation string) string {
	s.t.Helper()
	return s.e.requestWeb(s.t, s.ns, annotation)
}

func (s *story) rollout(g Gomega) *stepwisev1.Rollout { return s.e.rolloutWeb(g, s.ns) }

// partition is the partition the CloneSet applies ("60%", "0"), "" when unset.
func (s *story) partition(g Gomega) string {
	return appliedPartition(s.e.get(g, s.ns, "web"))
}

// waitRollout waits until check passes on the Rollout; a failure prints the
// last status read.
func (s *story) waitRollout(what string, check func(g Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	s.t.Helper()
	return s.e.waitRolloutWeb(s.t, s.ns, what, rolloutTimeout, check)
}

// holdRollout checks that check keeps passing for d.
func (s *story) holdRollout(what string, d time.Duration, check func(g Gomega, ro *stepwisev1.Rollout)) {
	s.t.Helper()
	var last *stepwisev1.Rollout
	NewWithT(s.t).Consistently(func(g Gomega) {
		last = s.rollout(g)
		check(g, last)
	}, d, rolloutPoll).Should(Succeed(), func() string { return what + "\n" + describeRollout(last) })
}

func describeRollout(ro *stepwisev1.Rollout) string {
	if ro == nil {
		return "no Rollout read"
	}
	b, _ := json.MarshalIndent(ro.Status, "", "  ")
	return "Rollout status: " + string(b)
}

// podsOn lists, sorted, the live Pods labelled with revision.
func (s *story) podsOn(g Gomega, revision string) []string {
	var names []string
	for _, p := range s.e.pods(g, s.ns) {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == revision {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// podsByImage counts the live Pods per app image.
func (s *story) podsByImage(g Gomega) map[string]int {
	out := map[string]int{}
	for _, p := range s.e.pods(g, s.ns) {
		out[imageOf(&p, "app")]++
	}
	return out
}

// restarts maps each Pod name to its app container's restart count.
func (s *story) restarts(g Gomega) map[string]int32 {
	out := map[string]int32{}
	for _, p := range s.e.pods(g, s.ns) {
		cs := containerStatus(&p, "app")
		g.Expect(cs).NotTo(BeNil(), "pod %s has a status for app", p.Name)
		out[p.Name] = cs.RestartCount
	}
	return out
}

// expectKeptPods asserts that every original Pod is still there (same
// name, UID, IP, node) and runs image, in spec and in its status.
func (s *story) expectKeptPods(g Gomega, image string) {
	pods := s.e.pods(g, s.ns)
	g.Expect(snapshot(pods)).To(Equal(s.original), "every Pod kept its name, UID, IP and node")
	for _, p := range pods {
		g.Expect(imageOf(&p, "app")).To(Equal(image), "pod %s spec", p.Name)
		g.Expect(containerStatus(&p, "app").Image).To(Equal(image), "pod %s status", p.Name)
		g.Expect(podCondition(&p, corev1.PodReady)).To(Equal(corev1.ConditionTrue), "pod %s ready", p.Name)
	}
}

// events returns the notes of the Rollout's Events with reason. The events
// recorder folds repeats into a series only when they are about the same
// resourceVersion of the Rollout, and every decision writes the status, so
// each occurrence is its own Event.
func (s *story) events(g Gomega, reason string) []string {
	var list eventsv1.EventList
	g.Expect(s.e.client.List(context.Background(), &list, client.InNamespace(s.ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "Rollout" && ev.Regarding.Name == "web" && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// waitEvents waits until the notes of the Rollout's Events with reason
// match m: Events are sent after the status is written, asynchronously.
func (s *story) waitEvents(reason string, m OmegaMatcher) {
	s.t.Helper()
	NewWithT(s.t).Eventually(func(g Gomega) {
		g.Expect(s.events(g, reason)).To(m, "%s Events", reason)
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
}

// waitEvent waits for an Event with reason whose note holds every part.
func (s *story) waitEvent(reason string, parts ...string) {
	s.t.Helper()
	s.waitEvents(reason, ContainElement(SatisfyAll(containsAll(parts)...)))
}

func containsAll(parts []string) []OmegaMatcher {
	ms := []OmegaMatcher{Not(BeEmpty())}
	for _, p := range parts {
		ms = append(ms, ContainSubstring(p))
	}
	return ms
}

// condition returns a condition's status and message ("" when absent).
func condition(ro *stepwisev1.Rollout, typ string) (metav1.ConditionStatus, string, string) {
	c := apimeta.FindStatusCondition(ro.Status.Conditions, typ)
	if c == nil {
		return "", "", ""
	}
	return c.Status, c.Reason, c.Message
}

// waitHealthyAt waits for the end of a completed rollout: Healthy on
// revision, Ready, not Stalled, partition re-armed.
func (s *story) waitHealthyAt(revision string) *stepwisev1.Rollout {
	s.t.Helper()
	return s.waitRollout("Healthy on "+revision, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(revision))
		g.Expect(ro.Status.CanaryRevision).To(BeEmpty())
		g.Expect(ro.Status.CurrentStepIndex).To(BeNil())
		status, reason, _ := condition(ro, meta.ReadyCondition)
		g.Expect(status).To(Equal(metav1.ConditionTrue))
		g.Expect(reason).To(Equal(stepwisev1.ReasonStable))
		status, _, _ = condition(ro, meta.StalledCondition)
		g.Expect(status).To(BeEmpty(), "no Stalled condition")
		g.Expect(s.partition(g)).To(Equal("0"), "every Pod may run the new stable revision")
	})
}

// waitRates waits until Prometheus has a rate for both codes of n Pods of
// the namespace. rate() needs two samples in its window, so a Pod's first
// second or two of traffic yield no series: an analysis of a brand-new Pod
// is inconclusive, as it should be (see testNoData). A real release comes
// to an app that has been serving for a while; the stories start there.
func (s *story) waitRates(n int) {
	s.t.Helper()
	q := fmt.Sprintf(`count(rate(http_requests_total{namespace=%q}[10s]))`, s.ns)
	NewWithT(s.t).Eventually(func(g Gomega) {
		v, _, _, err := s.e.promAPI.Query(context.Background(), q, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		vec, ok := v.(model.Vector)
		g.Expect(ok).To(BeTrue(), "vector result, got %s", v.Type())
		g.Expect(vec).To(HaveLen(1), "the namespace has rates")
		g.Expect(float64(vec[0].Value)).To(BeEquivalentTo(2*n), "a 200 and a 500 rate per Pod")
	}, rolloutTimeout, 250*time.Millisecond).Should(Succeed())
}

// recorder keeps, from watches, everything a story's Rollout and CloneSet
// went through, so a story can assert on what happened between two looks:
// each partition value, each step, each measurement.
type recorder struct {
	mu         sync.Mutex
	partitions []string
	statuses   []stepwisev1.RolloutStatus
	// broken is set when a watch ended before the story did: the history
	// would have a hole.
	broken bool
}

// record starts watching the namespace's Rollouts and CloneSets. The API
// server sends every resourceVersion on a watch, so no status write is
// missed however fast they follow each other.
func (e *rolloutEnv) record(t *testing.T, ns string) *recorder {
	t.Helper()
	rec := &recorder{}
	ctx := t.Context()
	rw, err := e.watcher.Watch(ctx, &stepwisev1.RolloutList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	cw, err := e.watcher.Watch(ctx, &stepwisev1.CloneSetList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	follow := func(w watch.Interface, seen func(obj any)) {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			seen(ev.Object)
		}
		if ctx.Err() == nil {
			rec.mu.Lock()
			rec.broken = true
			rec.mu.Unlock()
		}
	}
	go follow(rw, func(obj any) {
		if ro, ok := obj.(*stepwisev1.Rollout); ok {
			rec.mu.Lock()
			rec.statuses = append(rec.statuses, *ro.Status.DeepCopy())
			rec.mu.Unlock()
		}
	})
	go follow(cw, func(obj any) {
		cs, ok := obj.(*stepwisev1.CloneSet)
		if !ok {
			return
		}
		p := appliedPartition(cs)
		rec.mu.Lock()
		if n := len(rec.partitions); n == 0 || rec.partitions[n-1] != p {
			rec.partitions = append(rec.partitions, p)
		}
		rec.mu.Unlock()
	})
	return rec
}

// appliedPartition is the partition a CloneSet applies: its governing
// Rollout's, as status.rollout reports it, else its spec's ("" when unset).
func appliedPartition(cs *stepwisev1.CloneSet) string {
	if g := cs.Status.Rollout; g != nil {
		return g.Partition.String()
	}
	if cs.Spec.UpdateStrategy.Partition != nil {
		return cs.Spec.UpdateStrategy.Partition.String()
	}
	return ""
}

// afterCommit is how every story's partitions begin, before the steps the
// story adds: "" while the CloneSet runs alone, 100% once the Rollout
// governs it and until its first decision, 0 when the Rollout lets every
// Pod run the stable revision, 100% again when a commit brings a revision
// the Rollout has not acknowledged yet.
func afterCommit(steps ...string) []string {
	return append([]string{"", "100%", "0", "100%"}, steps...)
}

// partitionHistory is every partition the CloneSet held, in order, without
// repeats; the first is "" (created without one).
func (r *recorder) partitionHistory(g Gomega) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g.Expect(r.broken).To(BeFalse(), "the CloneSet watch ran for the whole story")
	return slices.Clone(r.partitions)
}

// track is a projection of every Rollout status seen, without consecutive
// repeats.
func (r *recorder) track(g Gomega, f func(st *stepwisev1.RolloutStatus) string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g.Expect(r.broken).To(BeFalse(), "the Rollout watch ran for the whole story")
	var out []string
	for i := range r.statuses {
		v := f(&r.statuses[i])
		if n := len(out); n == 0 || out[n-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// steps is the step in progress over time: "<canary>@<index>", or "-" when none.
func (r *recorder) steps(g Gomega) []string {
	return r.track(g, func(st *stepwisev1.RolloutStatus) string {
		if st.CurrentStepIndex == nil {
			return "-"
		}
		return fmt.Sprintf("%s@%d", st.CanaryRevision, *st.CurrentStepIndex)
	})
}

// phases is the phase (and reason) over time.
func (r *recorder) phases(g Gomega) []string {
	return r.track(g, func(st *stepwisev1.RolloutStatus) string { return string(st.Phase) + "/" + st.Reason })
}

// measurements is every measurement ever stored in status, oldest first:
// status keeps only the last 20, and an analysis restarted from scratch
// would show here as extra measurements of the same step.
func (r *recorder) measurements(g Gomega) []stepwisev1.Measurement {
	r.mu.Lock()
	defer r.mu.Unlock()
	g.Expect(r.broken).To(BeFalse(), "the Rollout watch ran for the whole story")
	seen := map[string]bool{}
	var out []stepwisev1.Measurement
	for _, st := range r.statuses {
		for _, m := range st.Measurements {
			key := measurementKey(m)
			if !seen[key] {
				seen[key] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// measurementKey identifies a measurement across the statuses it appears in.
func measurementKey(m stepwisev1.Measurement) string {
	return fmt.Sprintf("%s/%d/%s/%s/%s", m.Metric, m.Step, m.Time.UTC().Format(time.RFC3339), m.Phase, m.Value)
}

// analysisRuns lists each analysis run seen, as "<step>/<revision>/<startedAt>".
func (r *recorder) analysisRuns(g Gomega) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g.Expect(r.broken).To(BeFalse(), "the Rollout watch ran for the whole story")
	var out []string
	for _, st := range r.statuses {
		if a := st.Analysis; a != nil {
			run := fmt.Sprintf("%d/%s/%s", a.StepIndex, a.Revision, a.StartedAt.UTC().Format(time.RFC3339))
			if !slices.Contains(out, run) {
				out = append(out, run)
			}
		}
	}
	return out
}

// pauseBefore is how long after step i passed the workload gate its
// analysis started (both times to the second, as status keeps them), the
// first time that step was analysed.
func (r *recorder) pauseBefore(g Gomega, i int32) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.statuses {
		if a := st.Analysis; a != nil && a.StepIndex == i && st.StepReadyAt != nil {
			return a.StartedAt.Sub(st.StepReadyAt.Time)
		}
	}
	g.Expect(r.statuses).To(ContainElement(HaveField("Analysis", HaveField("StepIndex", i))), "an analysis of step %d", i)
	return 0
}

// conditionMessages lists the distinct messages of a condition whenever it
// was True.
func (r *recorder) conditionMessages(typ string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, st := range r.statuses {
		if c := apimeta.FindStatusCondition(st.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue && !slices.Contains(out, c.Message) {
			out = append(out, c.Message)
		}
	}
	return out
}

// stepsOf counts measurements per step.
func stepsOf(ms []stepwisev1.Measurement) map[int32]int {
	out := map[int32]int{}
	for _, m := range ms {
		out[m.Step]++
	}
	return out
}

// phasesOf lists the measurements' phases.
func phasesOf(ms []stepwisev1.Measurement) []stepwisev1.MeasurementPhase {
	out := make([]stepwisev1.MeasurementPhase, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Phase)
	}
	return out
}

func stepAt(revision string, i int) string { return fmt.Sprintf("%s@%d", revision, i) }

func runName(ro *stepwisev1.Rollout) string {
	a := ro.Status.Analysis
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%d/%s/%s", a.StepIndex, a.Revision, a.StartedAt.UTC().Format(time.RFC3339))
}
