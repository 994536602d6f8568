package cloneset

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// syncRound carries one reconcile's observations from fetch to status, and
// what the round did, told once it ends: the status findings and the
// Events. The steps that write Pods record here rather than emit, so a
// round's Events leave in one place (Reconcile), after its writes.
type syncRound struct {
	cs              *stepwisev1.CloneSet
	now             time.Time
	selector        labels.Selector
	pods            []*corev1.Pod
	podsByName      map[string]*corev1.Pod
	revs            *revisionSet
	expectedUpdated int32
	// gov is what the Rollout governing the CloneSet allows, if one does.
	gov      governance
	findings statusFindings
	// statusOnly means the pods were not acted on this round.
	statusOnly bool
	// counts are the Pods as status reports them, once computed.
	counts *podCounts
	// isUpdating is the engine's, which remembers the Pods it found settled.
	isUpdating func(*corev1.Pod) bool
	// podActions are the round's Pod writes, told once the round ends.
	podActions podActions
	// told are the round's other Events (failures, lifecycle holds), in
	// the order they happened.
	told []roundEvent
	// mu guards findings, podActions and told while the round writes Pods
	// concurrently (writePods).
	mu sync.Mutex
}

// roundEvent is one Event a round tells.
type roundEvent struct {
	eventType, reason, note string
}

// noteAction records a Pod write for the round's Events.
func (round *syncRound) noteAction(reason, prefix, pod, suffix string) {
	round.mu.Lock()
	defer round.mu.Unlock()
	round.podActions.add(reason, prefix, pod, suffix)
}

// failed records a failed Pod write: in the round's status (record) and in
// a Warning Event of reason with msg.
func (round *syncRound) failed(reason, msg string, record func(*statusFindings)) {
	round.mu.Lock()
	defer round.mu.Unlock()
	if record != nil {
		record(&round.findings)
	}
	round.told = append(round.told, roundEvent{eventType: corev1.EventTypeWarning, reason: reason, note: msg})
}

// tell records an Event that is not a Pod write of the plan's.
func (round *syncRound) tell(eventType, reason, note string) {
	round.mu.Lock()
	defer round.mu.Unlock()
	round.told = append(round.told, roundEvent{eventType: eventType, reason: reason, note: note})
}

// events are the round's Events: those told one by one, then one per kind
// of Pod write (podActions).
func (round *syncRound) events() []roundEvent {
	round.mu.Lock()
	defer round.mu.Unlock()
	out := append([]roundEvent(nil), round.told...)
	for _, e := range round.podActions.events() {
		out = append(out, roundEvent{eventType: corev1.EventTypeNormal, reason: e.reason, note: e.note})
	}
	return out
}

// podCounts counts the round's Pods once; sync (for its requeue) and the
// status patch both read it.
func (round *syncRound) podCounts() podCounts {
	if round.counts == nil {
		updateRevision := ""
		if round.revs != nil {
			updateRevision = round.revs.update.Name
		}
		c := countPods(round.pods, updateRevision, round.cs.Spec.MinReadySeconds, round.isUpdating, round.now)
		round.counts = &c
	}
	return *round.counts
}
