package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

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

// afterCommit matches how every story's partitions begin, before the
// steps the story adds: "" while the CloneSet runs alone, 100% once the
// Rollout governs it and until its first decision, 0 when the Rollout lets
// every Pod run the stable revision, 100% again when a commit brings a
// revision the Rollout has not acknowledged yet. The first 100% is seen
// only when the CloneSet's round notices the Rollout before the Rollout's
// first decision lands, which the order of the two controllers' rounds
// decides (stories running side by side saw both); no Pod moves either way.
func afterCommit(steps ...string) types.GomegaMatcher {
	return Or(
		Equal(append([]string{"", "100%", "0", "100%"}, steps...)),
		Equal(append([]string{"", "0", "100%"}, steps...)),
	)
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
