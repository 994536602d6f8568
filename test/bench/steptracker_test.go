package bench

import (
	"context"
	"io"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/compare"
)

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
	s := compare.PodStateOf(pod, "example.com/app:v2")
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
