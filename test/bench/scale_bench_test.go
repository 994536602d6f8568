package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
	"github.com/stepwise-dev/stepwise/test/compare"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
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
