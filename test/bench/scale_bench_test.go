package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/compare"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
	"github.com/stepwise-dev/stepwise/test/promrunner"
	"github.com/stepwise-dev/stepwise/test/traffic"
)

// Sizes of make bench-scale; the Makefile's SCALE_* variables set them.
var (
	scaleCloneSets    = flag.Int("scale-clonesets", 10, "BenchmarkScale: big CloneSets, all updated at once (maxUnavailable 100%)")
	scalePods         = flag.Int("scale-pods", 1000, "BenchmarkScale: Pods per big CloneSet")
	scaleRollouts     = flag.Int("scale-rollouts", 200, "BenchmarkScale: small CloneSets, each driven by a Rollout with analysis")
	scaleRolloutPods  = flag.Int("scale-rollout-pods", 4, "BenchmarkScale: Pods per small CloneSet")
	scaleAnalysis     = flag.Int("scale-analysis-count", 6, "BenchmarkScale: measurements of the analysis step, one every 10 s")
	scaleTimeout      = flag.Duration("scale-timeout", 40*time.Minute, "BenchmarkScale: bound of the creation and of the update")
	scaleReport       = flag.String("scale-report", "", "BenchmarkScale: write the report here as well")
	scaleManagerArgs  = flag.String("scale-manager-args", "", "BenchmarkScale: more flags for the manager, space-separated (--cloneset-concurrency=16)")
	scaleManagerEnv   = flag.String("scale-manager-env", "", "BenchmarkScale: more environment for the manager alone, space-separated KEY=VALUE (GOGC=100)")
	scaleSampleEvery  = 2 * time.Second
	scaleAnalysisTick = 10 * time.Second
)

const (
	bigNamespace  = "scale-big"
	rollNamespace = "scale-roll"
)

// The small CloneSets' steps: one canary, then half with the analysis,
// then all. Steps 0 and 2 wait only on the workload gate, so their advance
// is the reaction to the last canary Pod becoming ready.
var scaleSteps = []string{"75%", "50%", "0"}

// BenchmarkScale is make bench-scale: -scale-clonesets CloneSets of
// -scale-pods Pods updated at once, while -scale-rollouts Rollouts, each
// over a small CloneSet of its own, step through an analysis against one
// real Prometheus (a query every 10 s each). It reports wall time, writes
// per Pod, the manager's peak RSS, the step reaction time, Prometheus
// queries per second, and the manager's reconciles per second and
// workqueue depth over time.
func BenchmarkScale(b *testing.B) {
	nBig, perBig, nRoll, perRoll := *scaleCloneSets, *scalePods, *scaleRollouts, *scaleRolloutPods
	totalPods := nBig*perBig + nRoll*perRoll
	nodes := (totalPods + podsPerNode - 1) / podsPerNode
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	// The benchmark's own watches log nothing worth reading.
	ctrllog.SetLogger(logr.Discard())

	policy := filepath.Join(b.TempDir(), "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(compare.AuditPolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d big CloneSets x %d Pods, %d Rollouts x %d Pods: %d Pods on %d kwok nodes; load %s", nBig, perBig, nRoll, perRoll, totalPods, nodes, loadAverage())
	cluster := kwokcluster.StartForTest(b, kwokcluster.Options{Nodes: nodes, AuditPolicyFile: policy, Logf: b.Logf, StartTimeout: 10 * time.Minute})
	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.UserAgent = benchAgent
	c, err := harness.NewClient(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{bigNamespace, rollNamespace} {
		if err := cluster.CreateNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
	}

	// The small CloneSets' Pods, CloneSets and Rollouts, seen by the
	// benchmark's own watches: the traffic simulator reads the Pods, and
	// the step reactions are timed from these events.
	scheme, err := harness.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	watchCache, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{rollNamespace: {}}})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = watchCache.Start(ctx) }()
	cached, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: watchCache}})
	if err != nil {
		b.Fatal(err)
	}
	tr := newStepTracker(perRoll)
	tr.watch(b, ctx, watchCache)

	sim, err := traffic.Start(ctx, "127.0.0.1:0", traffic.Options{Client: cached, Namespace: rollNamespace, Interval: time.Second, Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sim.Stop)
	prom, err := promrunner.Start(ctx, []string{sim.Addr()}, promrunner.Options{Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(prom.Stop)

	pprofAddr := freeAddr(b)
	proc := startStepwiseWithEnv(b, cluster.Kubeconfig, strings.Fields(*scaleManagerEnv),
		append([]string{"--pprof-bind-address", pprofAddr}, strings.Fields(*scaleManagerArgs)...)...)

	// Create everything, then wait until every Pod is ready and every
	// Rollout Healthy on image v1.
	created := time.Now()
	var objs []client.Object
	for i := range nBig {
		objs = append(objs, scaleCloneSet(bigNamespace, fmt.Sprintf("big-%02d", i), perBig))
	}
	for i := range nRoll {
		name := fmt.Sprintf("roll-%03d", i)
		objs = append(objs, scaleCloneSet(rollNamespace, name, perRoll), scaleRollout(name, prom.URL(), *scaleAnalysis))
	}
	parallel(b, 8, len(objs), func(i int) error { return c.Create(ctx, objs[i]) })
	settled := waitScale(b, ctx, c, "creating", created, *scaleTimeout, nil)
	b.Logf("%d Pods created and ready, %d Rollouts Healthy, in %s; load %s", totalPods, nRoll, settled.Sub(created).Round(time.Second), loadAverage())

	// The change: every CloneSet's image to v2 at once.
	var rolls stepwisev1.CloneSetList
	if err := c.List(ctx, &rolls, client.InNamespace(rollNamespace)); err != nil {
		b.Fatal(err)
	}
	tr.begin(rolls.Items)
	proc.resetPeak(b)
	cpu0 := proc.cpuSeconds(b)
	loadBefore := loadAverage()
	sampler := startSampler(ctx, c, proc, prom.URL())
	b.ResetTimer()
	start := time.Now()
	patch := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"example.com/app:v2"}]`)
	parallel(b, 16, len(objs), func(i int) error {
		cs, ok := objs[i].(*stepwisev1.CloneSet)
		if !ok {
			return nil
		}
		target := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: cs.Name}}
		return c.Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch))
	})
	patched := time.Since(start)
	var bigDone time.Time
	end := waitScale(b, ctx, c, "updating", start, *scaleTimeout, &bigDone)
	// The closing status writes land just after.
	time.Sleep(2 * time.Second)
	countTo := time.Now()
	b.StopTimer()
	samples := sampler.stop()
	// Read before the heap profile: building and compressing it is the
	// benchmark's work in the manager, not the update's.
	peakRSS, cpu := proc.peakRSS(b), proc.cpuSeconds(b)-cpu0

	saveHeapProfile(b, "http://"+pprofAddr+"/debug/pprof/heap")
	writes := countWrites(b, cluster.AuditLogPath(), stepwiseAgent, start, countTo)
	reactions := tr.reactions()
	splitAtWrites(b, cluster.AuditLogPath(), start, countTo, reactions.traces)
	rep := scaleReportData{
		when: time.Now().UTC(), nBig: nBig, perBig: perBig, nRoll: nRoll, perRoll: perRoll, nodes: nodes,
		created: settled.Sub(created), patched: patched, bigWall: -1, allWall: end.Sub(start),
		writes: writes, peakRSS: peakRSS, cpu: cpu,
		loadBefore: loadBefore, loadAfter: loadAverage(), samples: samples, start: start,
		reactions: reactions, rolloutsDone: tr.doneTimes(start),
	}
	if !bigDone.IsZero() {
		rep.bigWall = bigDone.Sub(start)
	}
	var out bytes.Buffer
	rep.write(&out)
	fmt.Print("\n" + out.String())
	if *scaleReport != "" {
		if err := os.WriteFile(*scaleReport, out.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	all, _ := writes.Total()
	b.ReportMetric(rep.bigWall.Seconds(), "s/big-updated-ready")
	b.ReportMetric(float64(all)/float64(totalPods), "writes/pod")
	b.ReportMetric(float64(rep.peakRSS)/(1<<20), "manager-peak-RSS-MiB")
	if n := len(rep.reactions.gate); n > 0 {
		b.ReportMetric(float64(compare.Percentile(rep.reactions.gate, 99).Milliseconds()), "ms-gate-reaction-p99")
	}
}

// saveHeapProfile keeps the manager's heap profile after the run, for
// `go tool pprof -sample_index=inuse_space FILE`.
func saveHeapProfile(b *testing.B, url string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Logf("heap profile: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	f, err := os.CreateTemp("", "stepwise-bench-scale-heap-*.pprof")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Logf("heap profile: %v", err)
		return
	}
	b.Logf("manager heap profile: %s", f.Name())
}

func scaleCloneSet(ns, name string, replicas int) *stepwisev1.CloneSet {
	maxUnavailable := intstr.FromString("100%")
	labels := map[string]string{"app": name}
	return &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1"}}},
			},
			UpdateStrategy: stepwisev1.CloneSetUpdateStrategy{
				Type:           stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType,
				MaxUnavailable: &maxUnavailable,
			},
		},
	}
}

// scaleRollout walks a small CloneSet through scaleSteps; the middle step
// is judged by the error ratio of its canary Pods since they became ready,
// every 10 s.
func scaleRollout(name, promURL string, count int) *stepwisev1.Rollout {
	skip := &stepwisev1.StepAnalysis{Skip: true}
	var steps []stepwisev1.RolloutStep
	for i, p := range scaleSteps {
		s := stepwisev1.RolloutStep{Partition: intstr.Parse(p)}
		if i != 1 {
			s.Analysis = skip
		}
		steps = append(steps, s)
	}
	return &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: rollNamespace, Name: name},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: name},
			Steps:       steps,
			Analysis: &stepwisev1.AnalysisSpec{
				Interval:          &metav1.Duration{Duration: scaleAnalysisTick},
				Count:             ptr.To(int32(count)),
				FailureLimit:      ptr.To(int32(0)),
				InconclusiveLimit: ptr.To(int32(3)),
				// Prometheus scrapes every second here.
				ScrapeMargin: &metav1.Duration{Duration: 3 * time.Second},
				Metrics: []stepwisev1.Metric{{
					Name: "error-rate",
					Prometheus: &stepwisev1.PrometheusMetric{
						Address: promURL,
						Query: `(sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[{{ .CanaryAge }}])) or vector(0))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))`,
					},
					ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.05"},
				}},
			},
		},
	}
}

// parallel runs f(0..n-1) on workers goroutines and fails on the first error.
func parallel(b *testing.B, workers, n int, f func(i int) error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d of %d calls failed, first: %v", len(errs), n, errs[0])
	}
}

// waitScale waits until every CloneSet has all its Pods updated and ready
// and every Rollout is Healthy on the CloneSet's revision, and returns when
// it saw that. bigDone, when not nil, gets when the big CloneSets alone
// were done.
func waitScale(b *testing.B, ctx context.Context, c client.Client, what string, start time.Time, timeout time.Duration, bigDone *time.Time) time.Time {
	deadline := start.Add(timeout)
	lastLog := time.Now()
	for {
		var big, small stepwisev1.CloneSetList
		var ros stepwisev1.RolloutList
		err := c.List(ctx, &big, client.InNamespace(bigNamespace))
		if err == nil {
			err = c.List(ctx, &small, client.InNamespace(rollNamespace))
		}
		if err == nil {
			err = c.List(ctx, &ros, client.InNamespace(rollNamespace))
		}
		now := time.Now()
		if err == nil {
			bigLeft, bigReady := cloneSetsLeft(big.Items)
			smallLeft, _ := cloneSetsLeft(small.Items)
			revisions := map[string]string{}
			for _, cs := range small.Items {
				revisions[cs.Name] = cs.Status.UpdateRevision
			}
			rollLeft := 0
			for _, ro := range ros.Items {
				if ro.Status.Phase != stepwisev1.RolloutHealthy || ro.Status.StableRevision != revisions[ro.Name] || ro.Status.ObservedGeneration != ro.Generation {
					rollLeft++
				}
			}
			if bigDone != nil && bigDone.IsZero() && bigLeft == 0 {
				*bigDone = now
			}
			if bigLeft == 0 && smallLeft == 0 && rollLeft == 0 {
				return now
			}
			if time.Since(lastLog) > 30*time.Second {
				b.Logf("%s, %s: big CloneSets not done %d (Pods updated and ready %d), small %d, Rollouts not Healthy %d; load %s",
					what, now.Sub(start).Round(time.Second), bigLeft, bigReady, smallLeft, rollLeft, loadAverage())
				lastLog = time.Now()
			}
		}
		if now.After(deadline) {
			if bigDone == nil {
				b.Fatalf("%s: not done after %s (last error: %v)", what, timeout, err)
			}
			// The update: report what was reached, so that a size too big
			// for the machine still says how far it got.
			b.Errorf("%s: not done after %s (last error: %v); the report shows how far it got", what, timeout, err)
			return now
		}
		time.Sleep(time.Second) // the benchmark's observation loop, not a controller's
	}
}

// cloneSetsLeft counts the CloneSets not all updated and ready, and the
// Pods updated and ready (compare.UpdateProgress).
func cloneSetsLeft(items []stepwisev1.CloneSet) (left int, updatedReady int32) {
	counts := make([]compare.CloneSetCounts, 0, len(items))
	for _, cs := range items {
		counts = append(counts, compare.CloneSetCounts{
			Generation: cs.Generation, ObservedGeneration: cs.Status.ObservedGeneration,
			Replicas: ptr.Deref(cs.Spec.Replicas, 0), Ready: cs.Status.ReadyReplicas, UpdatedReady: cs.Status.UpdatedReadyReplicas,
			CurrentRevision: cs.Status.CurrentRevision, UpdateRevision: cs.Status.UpdateRevision,
		})
	}
	return compare.UpdateProgress(counts)
}

// stepTracker times, from the benchmark's watches, each small CloneSet's
// canary Pods becoming ready on the new image, its status catching up,
// and its Rollout moving on.
type stepTracker struct {
	mu       sync.Mutex
	replicas int
	started  bool
	// Per CloneSet (and Rollout) name.
	initialRevision map[string]string
	readyPods       map[string]map[string]bool
	podReady        map[string]*compare.Thresholds // Pods ready on v2
	statusReady     map[string]*compare.Thresholds // status.updatedReadyReplicas on the new revision
	stepAt          map[string]map[int32]time.Time // first seen at currentStepIndex i
	passedAt        map[string]map[int32]time.Time // analysis Passed first seen at step i
	healthyAt       map[string]time.Time
}

func newStepTracker(replicas int) *stepTracker {
	return &stepTracker{replicas: replicas}
}

func (t *stepTracker) watch(b *testing.B, ctx context.Context, c cache.Cache) {
	add := func(obj client.Object, f func(obj any)) {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    f,
			UpdateFunc: func(_, o any) { f(o) },
		}); err != nil {
			b.Fatal(err)
		}
	}
	add(&corev1.Pod{}, observe(t, t.pod))
	add(&stepwisev1.CloneSet{}, observe(t, t.cloneSet))
	add(&stepwisev1.Rollout{}, observe(t, t.rollout))
}

// observe turns f into an informer handler: it is called, with the time of
// the event and t locked, for the objects of type T seen once t started.
func observe[T client.Object](t *stepTracker, f func(obj T, now time.Time)) func(any) {
	return func(obj any) {
		o, ok := obj.(T)
		if !ok {
			return
		}
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.started {
			f(o, now)
		}
	}
}

// begin starts timing the change, from the small CloneSets as they are.
func (t *stepTracker) begin(items []stepwisev1.CloneSet) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started = true
	t.initialRevision = map[string]string{}
	t.readyPods, t.podReady, t.statusReady = map[string]map[string]bool{}, map[string]*compare.Thresholds{}, map[string]*compare.Thresholds{}
	t.stepAt, t.passedAt, t.healthyAt = map[string]map[int32]time.Time{}, map[string]map[int32]time.Time{}, map[string]time.Time{}
	for _, cs := range items {
		t.initialRevision[cs.Name] = cs.Status.UpdateRevision
		t.readyPods[cs.Name] = map[string]bool{}
		t.podReady[cs.Name], t.statusReady[cs.Name] = &compare.Thresholds{}, &compare.Thresholds{}
		t.stepAt[cs.Name], t.passedAt[cs.Name] = map[int32]time.Time{}, map[int32]time.Time{}
	}
}

func (t *stepTracker) pod(pod *corev1.Pod, now time.Time) {
	set, ok := t.readyPods[pod.Labels["app"]]
	if !ok {
		return
	}
	s := podState(pod, "example.com/app:v2")
	set[pod.Name] = s.Ready && s.NewImage
	n := 0
	for _, ready := range set {
		if ready {
			n++
		}
	}
	t.podReady[pod.Labels["app"]].Observe(n, now)
}

func (t *stepTracker) cloneSet(cs *stepwisev1.CloneSet, now time.Time) {
	if cs.Status.UpdateRevision == t.initialRevision[cs.Name] || cs.Status.ObservedGeneration != cs.Generation {
		return
	}
	if th := t.statusReady[cs.Name]; th != nil {
		th.Observe(int(cs.Status.UpdatedReadyReplicas), now)
	}
}

func (t *stepTracker) rollout(ro *stepwisev1.Rollout, now time.Time) {
	steps, ok := t.stepAt[ro.Name]
	if !ok {
		return
	}
	st := ro.Status
	initial := t.initialRevision[ro.Name]
	if st.Phase == stepwisev1.RolloutHealthy && st.StableRevision != initial {
		if _, seen := t.healthyAt[ro.Name]; !seen {
			t.healthyAt[ro.Name] = now
		}
		return
	}
	if st.CurrentStepIndex == nil || st.CanaryRevision == "" || st.CanaryRevision == initial {
		return
	}
	i := *st.CurrentStepIndex
	if _, seen := steps[i]; !seen {
		steps[i] = now
	}
	if st.Analysis != nil && st.Analysis.Phase == stepwisev1.AnalysisPassed {
		if _, seen := t.passedAt[ro.Name][i]; !seen {
			t.passedAt[ro.Name][i] = now
		}
	}
}

// scaleReactions are the step reaction times, in three kinds.
type scaleReactions struct {
	// gate: the last canary Pod of a gate-only step ready on v2 (seen by
	// the Pod watch) to the Rollout's next step (or Healthy) in its status
	// (seen by the Rollout watch). cloneSetPart and rolloutPart split it at
	// the CloneSet's status reporting the Pods.
	gate, cloneSetPart, rolloutPart []time.Duration
	// traces are the gate reactions' moments, for splitting them further
	// at the status writes in the API server's audit log (splitAtWrites).
	traces []gateTrace
	// analysis: the analysis Passed in status to the next step.
	analysis []time.Duration
	missing  int
}

// gateTrace is one gate reaction: the Rollout (and CloneSet) name, the
// step, and the moments the benchmark's watches saw; the status writes
// that carried the CloneSet's count and the Rollout's next step, found in
// the audit log, split the two parts at the API server.
type gateTrace struct {
	name                        string
	step                        int
	podAt, statusAt, nextAt     time.Time
	cloneSetWrite, rolloutWrite compare.WriteTime
	foundCloneSet, foundRollout bool
}

func (t *stepTracker) reactions() scaleReactions {
	t.mu.Lock()
	defer t.mu.Unlock()
	var r scaleReactions
	for name, steps := range t.stepAt {
		// A gate-only step i ends at step i+1, or at Healthy after the last.
		for i, p := range scaleSteps {
			if i == 1 {
				continue
			}
			partition := intstr.Parse(p)
			kept, _ := intstr.GetScaledValueFromIntOrPercent(&partition, t.replicas, true)
			need := t.replicas - kept
			podAt, ok1 := t.podReady[name].First(need)
			statusAt, ok2 := t.statusReady[name].First(need)
			var nextAt time.Time
			var ok3 bool
			if i == len(scaleSteps)-1 {
				nextAt, ok3 = t.healthyAt[name]
			} else {
				nextAt, ok3 = steps[int32(i+1)]
			}
			if !ok1 || !ok2 || !ok3 {
				r.missing++
				continue
			}
			r.gate = append(r.gate, nextAt.Sub(podAt))
			r.traces = append(r.traces, gateTrace{name: name, step: i, podAt: podAt, statusAt: statusAt, nextAt: nextAt})
			r.cloneSetPart = append(r.cloneSetPart, statusAt.Sub(podAt))
			r.rolloutPart = append(r.rolloutPart, nextAt.Sub(statusAt))
		}
		passed, ok1 := t.passedAt[name][1]
		next, ok2 := steps[2]
		if ok1 && ok2 {
			r.analysis = append(r.analysis, next.Sub(passed))
		} else {
			r.missing++
		}
	}
	return r
}

// writeSlack is how long before a watch event's cause the write that
// carried it may have completed: the manager's watch can see a Pod ready
// before the benchmark's does.
const writeSlack = 2 * time.Second

// splitAtWrites finds, for each gate reaction, the manager's status writes
// that carried it: the CloneSet's last status write completed by the time
// its count was seen, and the Rollout's by the time its next step was.
func splitAtWrites(b *testing.B, auditLog string, from, to time.Time, traces []gateTrace) {
	const cloneSets, rollouts = "clonesets.stepwise.dev/status", "rollouts.stepwise.dev/status"
	written := map[compare.WrittenObject][]compare.WriteTime{}
	eachAuditFile(b, auditLog, func(f io.Reader) error {
		ws, err := compare.WriteTimes(f, stepwiseAgent, []string{cloneSets, rollouts}, from, to)
		for obj, times := range ws {
			written[obj] = append(written[obj], times...)
		}
		return err
	})
	for i := range traces {
		t := &traces[i]
		t.cloneSetWrite, t.foundCloneSet = compare.LastWrite(written[compare.WrittenObject{Resource: cloneSets, Namespace: rollNamespace, Name: t.name}],
			t.podAt.Add(-writeSlack), t.statusAt)
		t.rolloutWrite, t.foundRollout = compare.LastWrite(written[compare.WrittenObject{Resource: rollouts, Namespace: rollNamespace, Name: t.name}],
			t.statusAt.Add(-writeSlack), t.nextAt)
	}
}

// doneTimes is each Rollout's time from start to Healthy, sorted.
func (t *stepTracker) doneTimes(start time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for _, at := range t.healthyAt {
		out = append(out, at.Sub(start))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sampler scrapes the manager's and Prometheus' /metrics, the manager's
// resident memory and the big CloneSets' progress every scaleSampleEvery.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	out    []compare.Sample
}

var scaleSeries = map[string]compare.SeriesMatch{
	"cs_reconciles": {Metric: "controller_runtime_reconcile_total", Labels: []string{`controller="cloneset"`}},
	"ro_reconciles": {Metric: "controller_runtime_reconcile_total", Labels: []string{`controller="rollout"`}},
	"cs_depth":      {Metric: "workqueue_depth", Labels: []string{`name="cloneset"`}},
	"ro_depth":      {Metric: "workqueue_depth", Labels: []string{`name="rollout"`}},
	"cs_time_sum":   {Metric: "controller_runtime_reconcile_time_seconds_sum", Labels: []string{`controller="cloneset"`}},
	"cs_time_count": {Metric: "controller_runtime_reconcile_time_seconds_count", Labels: []string{`controller="cloneset"`}},
	// Reads around the cache: the audit policy logs no reads.
	"gets":      {Metric: "rest_client_requests_total", Labels: []string{`method="GET"`}},
	"handovers": {Metric: "stepwise_cloneset_rounds_handed_over_total"},
}

var promSeries = map[string]compare.SeriesMatch{
	"queries": {Metric: "prometheus_http_requests_total", Labels: []string{`handler="/api/v1/query"`}},
}

func startSampler(ctx context.Context, c client.Client, proc *controllerProcess, promURL string) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	managerSeries := maps.Clone(scaleSeries)
	maps.Copy(managerSeries, compare.GoMemorySeries)
	scrape := func(url string, wanted map[string]compare.SeriesMatch, into map[string]float64) {
		resp, err := http.Get(url)
		if err != nil {
			return
		}
		defer func() { _ = resp.Body.Close() }()
		got, err := compare.SumSeries(resp.Body, wanted)
		if err != nil {
			return
		}
		for k, v := range got {
			into[k] = v
		}
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(scaleSampleEvery)
		defer tick.Stop()
		for {
			v := map[string]float64{}
			at := time.Now()
			scrape(proc.metricsURL, managerSeries, v)
			scrape(promURL+"/metrics", promSeries, v)
			v["rss_mib"] = float64(proc.rss()) / (1 << 20)
			if anon, err := proc.statusBytes("RssAnon:"); err == nil {
				v["rss_anon_mib"] = float64(anon) / (1 << 20)
			}
			if file, err := proc.statusBytes("RssFile:"); err == nil {
				v["rss_file_mib"] = float64(file) / (1 << 20)
			}
			var big stepwisev1.CloneSetList
			if err := c.List(ctx, &big, client.InNamespace(bigNamespace)); err == nil {
				_, ready := cloneSetsLeft(big.Items)
				v["big_updated_ready"] = float64(ready)
			}
			s.out = append(s.out, compare.Sample{At: at, Values: v})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() []compare.Sample {
	s.cancel()
	<-s.done
	return s.out
}

type scaleReportData struct {
	when                         time.Time
	nBig, perBig, nRoll, perRoll int
	nodes                        int
	created, patched             time.Duration
	bigWall, allWall             time.Duration
	writes                       compare.Writes
	peakRSS                      int64
	cpu                          float64
	loadBefore, loadAfter        string
	samples                      []compare.Sample
	start                        time.Time
	reactions                    scaleReactions
	rolloutsDone                 []time.Duration
}

func (r scaleReportData) write(w *bytes.Buffer) {
	total := r.nBig*r.perBig + r.nRoll*r.perRoll
	ms := func(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
	fmt.Fprintf(w, "Scale run %s: %d CloneSets x %d Pods updated at once (maxUnavailable 100%%), %d Rollouts x %d Pods with analysis (%d measurements, one per %s); %d Pods on %d kwok nodes; load %s before, %s after.\n\n",
		r.when.Format("2006-01-02 15:04 MST"), r.nBig, r.perBig, r.nRoll, r.perRoll, *scaleAnalysis, scaleAnalysisTick, total, r.nodes, r.loadBefore, r.loadAfter)
	if *scaleManagerArgs != "" {
		fmt.Fprintf(w, "- manager flags besides the defaults: %s\n", *scaleManagerArgs)
	}
	if *scaleManagerEnv != "" {
		fmt.Fprintf(w, "- manager environment besides the run's: %s\n", *scaleManagerEnv)
	}
	fmt.Fprintf(w, "- creation of all Pods and Rollouts until ready/Healthy: %s\n", r.created.Round(time.Second))
	fmt.Fprintf(w, "- the %d image patches took %s\n", r.nBig+r.nRoll, r.patched.Round(time.Millisecond))
	if r.bigWall < 0 {
		fmt.Fprintf(w, "- big CloneSets NOT all updated and ready within -scale-timeout (%s)\n", *scaleTimeout)
	} else {
		fmt.Fprintf(w, "- wall time, big CloneSets all updated and ready: %s\n", r.bigWall.Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "- wall time, everything (every Rollout Healthy on v2): %s\n", r.allWall.Round(100*time.Millisecond))
	if n := len(r.rolloutsDone); n > 0 {
		fmt.Fprintf(w, "- Rollouts Healthy after: first %s, median %s, last %s\n", r.rolloutsDone[0].Round(100*time.Millisecond),
			compare.Percentile(r.rolloutsDone, 50).Round(100*time.Millisecond), r.rolloutsDone[n-1].Round(100*time.Millisecond))
	}
	all, conflicts := r.writes.Total()
	pods := 0
	for k, n := range r.writes {
		if k.Resource == "pods" || k.Resource == "pods/status" {
			pods += n
		}
	}
	fmt.Fprintf(w, "- manager writes (audit log): %d, %.2f per Pod (Pod writes %.2f per Pod; 409s %d)\n", all, float64(all)/float64(total), float64(pods)/float64(total), conflicts)
	for _, k := range r.writes.Sorted() {
		fmt.Fprintf(w, "    %-40s %d\n", k.String(), r.writes[k])
	}
	if n := len(r.samples); n > 0 {
		if _, scraped := r.samples[n-1].Values["gets"]; scraped {
			gets := compare.Increase(compare.Rates(r.samples, "gets"))
			fmt.Fprintf(w, "- manager reads from the API server (its rest_client_requests_total, GET: single objects and lists): %.0f, %.2f per Pod\n", gets, gets/float64(total))
		} else {
			// Not 0: a series that was never scraped is not a manager that read nothing.
			fmt.Fprintf(w, "- manager reads from the API server: not scraped (no rest_client_requests_total{method=\"GET\"} on its /metrics)\n")
		}
	}
	fmt.Fprintf(w, "- manager peak RSS: %.0f MiB; CPU %.1f s over the update\n", float64(r.peakRSS)/(1<<20), r.cpu)
	// The split tells the Go runtime's memory (heap, stacks: anonymous)
	// from the pages of the binary mapped in (file), which no cache change
	// moves; sampled, so the peaks are to within one sample.
	var anon, file float64
	for _, s := range r.samples {
		anon = max(anon, s.Values["rss_anon_mib"])
		file = max(file, s.Values["rss_file_mib"])
	}
	fmt.Fprintf(w, "    of which, sampled every %s: anonymous (Go heap, stacks, runtime) peak %.0f MiB, file-backed (the binary's pages) peak %.0f MiB\n", scaleSampleEvery, anon, file)
	// What the anonymous part is made of, from the Go runtime's metrics.
	if m, ok := compare.GoMemoryAtPeak(r.samples, "rss_anon_mib"); ok {
		fmt.Fprintf(w, "    Go runtime at the highest anonymous RSS: heap objects %.0f MiB (live at the last collection %.0f, next collection at %.0f), free heap not yet returned %.0f, unused in spans %.0f, stacks and runtime %.0f; the highest live heap of the run %.0f MiB\n",
			m.HeapObjects/(1<<20), m.HeapLive/(1<<20), m.HeapGoal/(1<<20), m.HeapFree/(1<<20), m.HeapUnused/(1<<20), m.Other/(1<<20), m.PeakLive/(1<<20))
	}
	rc := r.reactions
	if len(rc.gate) > 0 {
		fmt.Fprintf(w, "- step reaction, last canary Pod ready -> next step in the Rollout's status (%d gate-only steps): p50 %s, p99 %s, max %s\n",
			len(rc.gate), ms(compare.Percentile(rc.gate, 50)), ms(compare.Percentile(rc.gate, 99)), ms(compare.Percentile(rc.gate, 100)))
		fmt.Fprintf(w, "    of which Pod ready -> CloneSet status: p50 %s, p99 %s; CloneSet status -> Rollout: p50 %s, p99 %s\n",
			ms(compare.Percentile(rc.cloneSetPart, 50)), ms(compare.Percentile(rc.cloneSetPart, 99)),
			ms(compare.Percentile(rc.rolloutPart, 50)), ms(compare.Percentile(rc.rolloutPart, 99)))
	}
	writeSplits(w, r.start, rc.traces)
	if len(rc.analysis) > 0 {
		fmt.Fprintf(w, "- step reaction, analysis Passed in status -> next step (%d): p50 %s, p99 %s, max %s\n",
			len(rc.analysis), ms(compare.Percentile(rc.analysis, 50)), ms(compare.Percentile(rc.analysis, 99)), ms(compare.Percentile(rc.analysis, 100)))
	}
	if rc.missing > 0 {
		fmt.Fprintf(w, "- step transitions not timed (an event not seen): %d\n", rc.missing)
	}
	q := compare.Rates(r.samples, "queries")
	cs, ro := compare.Rates(r.samples, "cs_reconciles"), compare.Rates(r.samples, "ro_reconciles")
	fmt.Fprintf(w, "- Prometheus queries/s (its prometheus_http_requests_total, /api/v1/query): mean %.1f, max %.1f\n", compare.MeanRate(q), compare.MaxRate(q))
	fmt.Fprintf(w, "- reconciles/s: CloneSet mean %.1f max %.1f; Rollout mean %.1f max %.1f\n", compare.MeanRate(cs), compare.MaxRate(cs), compare.MeanRate(ro), compare.MaxRate(ro))
	if n := len(r.samples); n > 0 {
		if _, scraped := r.samples[n-1].Values["handovers"]; scraped {
			fmt.Fprintf(w, "- CloneSet rounds ended early to hand their worker to a governed CloneSet whose Pod turned ready: %.0f\n",
				compare.Increase(compare.Rates(r.samples, "handovers")))
		} else {
			// The counter has no series until the first hand-over.
			fmt.Fprintf(w, "- CloneSet rounds ended early for a governed CloneSet: none on /metrics (none happened, or a manager without stepwise_cloneset_rounds_handed_over_total)\n")
		}
	}
	maxDepth := map[string]float64{}
	for _, s := range r.samples {
		for _, k := range []string{"cs_depth", "ro_depth", "rss_mib"} {
			maxDepth[k] = max(maxDepth[k], s.Values[k])
		}
	}
	fmt.Fprintf(w, "- workqueue depth max: CloneSet %.0f, Rollout %.0f\n\n", maxDepth["cs_depth"], maxDepth["ro_depth"])

	// Over time, one row per 10 s.
	fmt.Fprintf(w, "| t | CloneSet reconciles/s | CloneSet reconcile mean ms | Rollout reconciles/s | CloneSet queue | Rollout queue | Prometheus queries/s | manager RSS MiB | big Pods updated+ready |\n|---|---|---|---|---|---|---|---|---|\n")
	const row = 10 * time.Second
	for i := 0; i < len(r.samples); {
		j := i + 1
		for j < len(r.samples)-1 && r.samples[j].At.Sub(r.samples[i].At) < row {
			j++
		}
		if j >= len(r.samples) {
			break
		}
		a, z := r.samples[i], r.samples[j]
		window := r.samples[i : j+1]
		depthCS, depthRO := 0.0, 0.0
		for _, s := range window {
			depthCS, depthRO = max(depthCS, s.Values["cs_depth"]), max(depthRO, s.Values["ro_depth"])
		}
		dt := z.At.Sub(a.At).Seconds()
		meanMS := 0.0
		if n := z.Values["cs_time_count"] - a.Values["cs_time_count"]; n > 0 {
			meanMS = 1000 * (z.Values["cs_time_sum"] - a.Values["cs_time_sum"]) / n
		}
		fmt.Fprintf(w, "| %s | %.1f | %.0f | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f |\n", z.At.Sub(r.start).Round(time.Second),
			nonNeg(z.Values["cs_reconciles"]-a.Values["cs_reconciles"])/dt, meanMS, nonNeg(z.Values["ro_reconciles"]-a.Values["ro_reconciles"])/dt,
			depthCS, depthRO, nonNeg(z.Values["queries"]-a.Values["queries"])/dt, z.Values["rss_mib"], z.Values["big_updated_ready"])
		i = j
	}
	fmt.Fprintln(w, "\n(queue: the highest workqueue_depth sampled in the row; samples every", scaleSampleEvery.String()+")")
}

func nonNeg(v float64) float64 { return max(v, 0) }

// writeSplits prints the gate reactions split at the manager's status
// writes, as percentiles of each part and as the slowest reactions whole:
// the parts' p99s come from different steps, and it is the slowest steps
// whose parts tell where the tail is.
func writeSplits(w *bytes.Buffer, start time.Time, traces []gateTrace) {
	type split struct {
		trace gateTrace
		// parts: [CloneSet, Rollout] x [manager, API server, watch].
		parts [2][3]time.Duration
		total time.Duration
	}
	var splits []split
	for _, t := range traces {
		if !t.foundCloneSet || !t.foundRollout {
			continue
		}
		s := split{trace: t, total: t.nextAt.Sub(t.podAt)}
		s.parts[0][0], s.parts[0][1], s.parts[0][2] = t.cloneSetWrite.Split(t.podAt, t.statusAt)
		s.parts[1][0], s.parts[1][1], s.parts[1][2] = t.rolloutWrite.Split(t.statusAt, t.nextAt)
		splits = append(splits, s)
	}
	if len(splits) == 0 {
		return
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }
	part := func(side, i int) []time.Duration {
		out := make([]time.Duration, 0, len(splits))
		for _, s := range splits {
			out = append(out, s.parts[side][i])
		}
		return out
	}
	fmt.Fprintf(w, "    split at the manager's status writes in the audit log (%d of %d steps found), p50 / p99 ms:\n", len(splits), len(traces))
	for side, name := range []string{"CloneSet (from the Pod ready)", "Rollout (from the CloneSet status)"} {
		fmt.Fprintf(w, "      %s: manager until its status patch reached the API server %s / %s; API server %s / %s; until the benchmark's watch saw it %s / %s\n", name,
			ms(compare.Percentile(part(side, 0), 50)), ms(compare.Percentile(part(side, 0), 99)),
			ms(compare.Percentile(part(side, 1), 50)), ms(compare.Percentile(part(side, 1), 99)),
			ms(compare.Percentile(part(side, 2), 50)), ms(compare.Percentile(part(side, 2), 99)))
	}
	sort.Slice(splits, func(i, j int) bool { return splits[i].total > splits[j].total })
	fmt.Fprintf(w, "    the slowest, ms (t after the change, Rollout, step: whole = CloneSet: manager + API server + watch | Rollout: manager + API server + watch):\n")
	for _, s := range splits[:min(8, len(splits))] {
		fmt.Fprintf(w, "      t+%s %s step %d: %s = %s + %s + %s | %s + %s + %s\n", s.trace.podAt.Sub(start).Round(100*time.Millisecond), s.trace.name, s.trace.step,
			ms(s.total), ms(s.parts[0][0]), ms(s.parts[0][1]), ms(s.parts[0][2]), ms(s.parts[1][0]), ms(s.parts[1][1]), ms(s.parts[1][2]))
	}
}
