package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/test/compare"
	"github.com/stepwise-dev/stepwise/test/kruise"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

var (
	compareRuns = flag.String("compare", "stepwise,deployment,kruise,kruise-noqps",
		"BenchmarkCompare: controllers to run, in order: stepwise, deployment, kruise (OpenKruise at its default client QPS), kruise-noqps (no client rate limit, as Stepwise)")
	kruiseBinary = flag.String("kruise-bin", "", "OpenKruise manager binary; empty: kruise-manager in $STEPWISE_BIN, else in bin/")
	svgOut       = flag.String("svg", "", "BenchmarkCompare: write the chart of the maxUnavailable 100% pass here")
	reportOut    = flag.String("report", "", "BenchmarkCompare: write the Markdown tables here")
	restartDelay = flag.String("restart-delay", "0",
		"BenchmarkCompare: how long kwok keeps a container stopped before starting it on its new image (the Pods' stepwise.dev/kwok-restart-delay); "+
			"kwok starts a new Pod's containers at once, so 0 charges a restart what it charges a start")
)

// The user agents the audit log attributes writes to. Each controller runs
// alone during its rollouts; the agents keep kwok's status writes, the
// scheduler's bindings and the benchmark's own changes out of the count.
const (
	stepwiseAgent = "stepwise-manager/"
	kruiseAgent   = "kruise-manager"
	kcmAgent      = "kube-controller-manager/"
	benchAgent    = "stepwise-bench"
)

var (
	stepwiseCloneSets = schema.GroupVersionResource{Group: "stepwise.dev", Version: "v1alpha1", Resource: "clonesets"}
	deployments       = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// compareRun is one controller under test.
type compareRun struct {
	key, name, agent, note string
	gvr                    schema.GroupVersionResource
	maxUnavailablePath     string
}

var compareCatalog = map[string]compareRun{
	"stepwise": {key: "stepwise", name: "Stepwise CloneSet", agent: stepwiseAgent, gvr: stepwiseCloneSets,
		maxUnavailablePath: "/spec/updateStrategy/maxUnavailable"},
	"deployment": {key: "deployment", name: "Deployment", agent: kcmAgent, gvr: deployments, note: "RSS and CPU: the whole kube-controller-manager",
		maxUnavailablePath: "/spec/strategy/rollingUpdate/maxUnavailable"},
	"kruise": {key: "kruise", name: "OpenKruise CloneSet, QPS 30", agent: kruiseAgent, gvr: kruise.CloneSets,
		maxUnavailablePath: "/spec/updateStrategy/rollingUpdate/maxUnavailable"},
	"kruise-noqps": {key: "kruise-noqps", name: "OpenKruise CloneSet, no QPS limit", agent: kruiseAgent, gvr: kruise.CloneSets,
		maxUnavailablePath: "/spec/updateStrategy/rollingUpdate/maxUnavailable"},
}

// comparePasses are the image changes every controller makes, in order.
var comparePasses = []struct{ maxUnavailable, image string }{
	{"100%", "example.com/app:v2"},
	{"20%", "example.com/app:v3"},
}

// BenchmarkCompare runs the same image change of -pods Pods by Stepwise's
// CloneSet, a Deployment and OpenKruise's CloneSet, one after the other on
// one kwok cluster, and prints their figures side by side (make bench-compare).
func BenchmarkCompare(b *testing.B) {
	n := *podCount
	ctx := context.Background()
	runs := strings.Split(*compareRuns, ",")
	for _, r := range runs {
		if _, ok := compareCatalog[r]; !ok {
			b.Fatalf("-compare: unknown controller %q", r)
		}
	}
	policy := filepath.Join(b.TempDir(), "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(compare.AuditPolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	cluster := kwokcluster.StartForTest(b, kwokcluster.Options{Nodes: (n + podsPerNode - 1) / podsPerNode, AuditPolicyFile: policy, Logf: b.Logf})
	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.UserAgent = benchAgent
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	results := make([][]compare.Result, len(comparePasses))
	var uninstallKruise func(context.Context) error
	for i, key := range runs {
		run := compareCatalog[key]
		last := i == len(runs)-1
		b.Logf("%s: %d Pods, load %s", run.name, n, loadAverage())
		var proc *controllerProcess
		switch key {
		case "stepwise":
			proc = startStepwise(b, cluster.Kubeconfig)
		case "deployment":
			pid, err := cluster.ComponentPID("kube-controller-manager")
			if err != nil {
				b.Fatal(err)
			}
			proc = &controllerProcess{pid: pid}
		case "kruise", "kruise-noqps":
			if uninstallKruise == nil {
				var err error
				if uninstallKruise, err = kruise.Install(ctx, cluster); err != nil {
					b.Fatal(err)
				}
			}
			qps := []string{"--rest-config-qps=30", "--rest-config-burst=50"} // its defaults, said out loud
			if key == "kruise-noqps" {
				qps = []string{"--rest-config-qps=-1"}
			}
			proc = startKruise(b, cluster.Kubeconfig, qps)
		}

		ns := "cmp-" + key
		if err := cluster.CreateNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		w := watchPods(b, cs, ns)
		w.begin(n, "example.com/app:v1", time.Now())
		created := time.Now()
		if _, err := dyn.Resource(run.gvr).Namespace(ns).Create(ctx, workload(key, n), metav1.CreateOptions{}); err != nil {
			b.Fatalf("%s: creating the workload: %v", run.name, err)
		}
		if initial := w.wait(b, run.name+" creating", passTimeout(n)); !initial.IsDone() {
			b.Fatalf("%s: the Pods never became ready on the first image", run.name)
		}
		b.Logf("%s: %d Pods created and ready in %s", run.name, n, time.Since(created).Round(time.Millisecond))

		for i, pass := range comparePasses {
			before := w.uids()
			proc.resetPeak(b)
			cpu0, bed0 := proc.cpuSeconds(b), bedCPUSeconds(b, cluster)
			load := loadAverage()
			start := time.Now()
			w.begin(n, pass.image, start)
			patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q},{"op":"replace","path":%q,"value":%q}]`,
				pass.image, run.maxUnavailablePath, pass.maxUnavailable)
			if _, err := dyn.Resource(run.gvr).Namespace(ns).Patch(ctx, "bench", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				b.Fatalf("%s: changing the image: %v", run.name, err)
			}
			progress := w.wait(b, fmt.Sprintf("%s, maxUnavailable %s", run.name, pass.maxUnavailable), passTimeout(n))
			// Writes that finish the rollout (the last status updates) land
			// just after the last Pod is ready: count two more seconds.
			time.Sleep(2 * time.Second)
			end := time.Now()
			writes := countWrites(b, cluster.AuditLogPath(), run.agent, start, end)
			bedCPU := bedCPUSeconds(b, cluster)
			for name := range bedCPU {
				if _, ok := bed0[name]; !ok {
					delete(bedCPU, name)
					continue
				}
				bedCPU[name] -= bed0[name]
			}
			after := w.uids()
			changed := 0
			for uid := range after {
				if !before[uid] {
					changed++
				}
			}
			if run.gvr.Resource != "deployments" && changed != 0 {
				// Both CloneSets update in place: a recreated Pod is a broken
				// benchmark (an API version that drops updateStrategy did once).
				b.Errorf("%s, maxUnavailable %s: %d Pods recreated, want every Pod updated in place", run.name, pass.maxUnavailable, changed)
			}
			res := compare.Result{
				Name: run.name, Pods: n, Wall: progress.Done, FirstReady: progress.FirstReady, MaxUnavailable: progress.MaxUnavail,
				Writes: writes, UIDsChanged: changed, PeakRSS: proc.peakRSS(b), CPUSeconds: proc.cpuSeconds(b) - cpu0,
				Note: run.note, Points: progress.Points, Timeline: w.timelineSummary(),
				BedCPUSeconds: bedCPU,
			}
			results[i] = append(results[i], res)
			all, conflicts := res.PerPod()
			b.Logf("%s, maxUnavailable %s: all ready on %s in %s, first after %s, most unavailable %d, writes/Pod %.2f (409s %.2f), UIDs changed %d, peak RSS %.0f MiB, CPU %.1f s; load before %s, after %s",
				run.name, pass.maxUnavailable, pass.image, res.Wall.Round(time.Millisecond), res.FirstReady.Round(time.Millisecond), res.MaxUnavailable,
				all, conflicts, changed, float64(res.PeakRSS)/(1<<20), res.CPUSeconds, load, loadAverage())
		}
		w.stop()
		// Before the controller stops: OpenKruise's namespace webhook
		// fails closed without its manager.
		if last { // the cluster goes with the benchmark; minutes saved at 1000 Pods
			proc.stop()
			continue
		}
		// The workload first, so that its controller does not recreate the
		// Pods the namespace deletion removes.
		if err := dyn.Resource(run.gvr).Namespace(ns).Delete(ctx, "bench", metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			b.Fatalf("%s: deleting the workload: %v", run.name, err)
		}
		deleteNamespace(b, ctx, cs, ns)
		proc.stop()
	}
	if uninstallKruise != nil {
		if err := uninstallKruise(ctx); err != nil {
			b.Errorf("deleting OpenKruise's webhook configurations: %v", err)
		}
	}
	logWriters(b, cluster.AuditLogPath())

	var out bytes.Buffer
	_, _ = fmt.Fprintf(&out, "Side-by-side image change of %d Pods on one kwok cluster (%d nodes), %s, load at the end %s.\n",
		n, (n+podsPerNode-1)/podsPerNode, time.Now().UTC().Format("2006-01-02 15:04 MST"), loadAverage())
	for i, pass := range comparePasses {
		compare.WriteTable(&out, fmt.Sprintf("maxUnavailable %s (ratios to the first row):", pass.maxUnavailable), results[i])
	}
	fmt.Print("\n" + out.String())
	if *reportOut != "" {
		if err := os.WriteFile(*reportOut, out.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if *svgOut != "" {
		var svg bytes.Buffer
		title := fmt.Sprintf("%d Pods, image change at maxUnavailable 100%%, one kwok cluster", n)
		if err := compare.WriteSVG(&svg, title, results[0]); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(*svgOut, svg.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// passTimeout bounds one rollout: OpenKruise at QPS 30 needs about 4 writes
// per Pod at 30 a second, Stepwise and kcm far less.
func passTimeout(n int) time.Duration {
	return max(3*time.Minute, time.Duration(n)*600*time.Millisecond)
}

// workload is the benchmarked object: n Pods of one container on image v1,
// maxUnavailable 100%, no surge; in place where the controller can.
func workload(key string, n int) *unstructured.Unstructured {
	template := map[string]any{
		"metadata": map[string]any{
			"labels":      map[string]any{"app": "bench"},
			"annotations": map[string]any{"stepwise.dev/kwok-restart-delay": *restartDelay},
		},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "example.com/app:v1"}}},
	}
	spec := map[string]any{
		"replicas": int64(n),
		"selector": map[string]any{"matchLabels": map[string]any{"app": "bench"}},
		"template": template,
	}
	obj := map[string]any{"metadata": map[string]any{"name": "bench"}, "spec": spec}
	switch key {
	case "deployment":
		obj["apiVersion"], obj["kind"] = "apps/v1", "Deployment"
		spec["strategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "100%", "maxSurge": int64(0)}}
	case "stepwise":
		obj["apiVersion"], obj["kind"] = "stepwise.dev/v1alpha1", "CloneSet"
		spec["updateStrategy"] = map[string]any{"type": "InPlaceIfPossible", "maxUnavailable": "100%"}
	default:
		obj["apiVersion"], obj["kind"] = "apps.kruise.io/v1beta1", "CloneSet"
		spec["updateStrategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{
			"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%", "maxSurge": int64(0)}}
	}
	return &unstructured.Unstructured{Object: obj}
}

// podWatch follows the Pods of one namespace through an informer and feeds
// the current pass's Progress.
type podWatch struct {
	mu       sync.Mutex
	store    cache.Store
	image    string
	progress *compare.Progress
	timeline *compare.Timeline
	stopCh   chan struct{}
}

func watchPods(b *testing.B, cs kubernetes.Interface, ns string) *podWatch {
	w := &podWatch{stopCh: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	w.store = inf.GetStore()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.set(obj) },
		UpdateFunc: func(_, obj any) { w.set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				w.mu.Lock()
				defer w.mu.Unlock()
				if w.progress != nil {
					now := time.Now()
					w.progress.Delete(string(pod.UID), now)
					w.timeline.Delete(string(pod.UID), now)
				}
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	factory.Start(w.stopCh)
	factory.WaitForCacheSync(w.stopCh)
	return w
}

func (w *podWatch) set(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.progress != nil {
		now, state := time.Now(), compare.PodStateOf(pod, w.image)
		w.progress.Set(string(pod.UID), state, now)
		w.timeline.Observe(string(pod.UID), state, now)
	}
}

// begin starts a new pass toward image, seeded with the Pods as they are.
func (w *podWatch) begin(n int, image string, start time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.image = image
	w.progress = compare.NewProgress(n, start)
	w.timeline = compare.NewTimeline(start)
	for _, obj := range w.store.List() {
		pod := obj.(*corev1.Pod)
		state := compare.PodStateOf(pod, image)
		w.progress.Seed(string(pod.UID), state)
		w.timeline.Seed(string(pod.UID), state)
	}
}

// wait returns the pass's progress once every Pod is ready on its image.
// After timeout it reports an error and returns the progress so far (Done
// stays -1, "never" in the table), so the other controllers still run.
func (w *podWatch) wait(b *testing.B, what string, timeout time.Duration) compare.Progress {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		p := *w.progress
		p.Points = append([]compare.Point(nil), p.Points...)
		w.mu.Unlock()
		if p.IsDone() {
			return p
		}
		if time.Now().After(deadline) {
			var last compare.Point
			if len(p.Points) > 0 {
				last = p.Points[len(p.Points)-1]
			}
			b.Errorf("%s: not all %d Pods ready on %s after %s (last: %+v)", what, p.Desired, w.image, timeout, last)
			return p
		}
		time.Sleep(100 * time.Millisecond) // the benchmark's observation loop, not a controller's
	}
}

// timelineSummary sums up the current pass's timeline.
func (w *podWatch) timelineSummary() compare.TimelineSummary {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timeline.Summary()
}

func (w *podWatch) uids() map[string]bool {
	uids := map[string]bool{}
	for _, obj := range w.store.List() {
		uids[string(obj.(*corev1.Pod).UID)] = true
	}
	return uids
}

func (w *podWatch) stop() { close(w.stopCh) }
