package cloneset

import (
	"errors"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// blockedReportDelay is how long a Pod must stay unready before it is
// reported as blocking an update.
const blockedReportDelay = 30 * time.Second

// blockerGrace returns how long until the longest-unready blocking Pod has
// been unready for blockedReportDelay; zero or less means report now.
func blockerGrace(round *syncRound, blockers []string) time.Duration {
	if len(blockers) == 0 {
		return 0
	}
	wait := blockedReportDelay
	for _, name := range blockers {
		pod := round.podsByName[name]
		if pod == nil {
			continue
		}
		since := pod.CreationTimestamp.Time
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
				since = c.LastTransitionTime.Time
			}
		}
		wait = min(wait, since.Add(blockedReportDelay).Sub(round.now))
	}
	return wait
}

// maxPodsWrittenPerRound bounds the Pods one reconcile writes: refreshes
// (one write each) and moves (two writes in a row). A worker holds one
// CloneSet until its round ends: with 10 CloneSets of 1000 Pods updating
// at once on 4 workers, long rounds held every worker for seconds while a
// CloneSet whose Rollout waited on it sat at the head of the queue
// (cloneset_priority.go); such a wait also ends a round sooner (gateWaits).
// Rounds of 10 are slower overall, and rounds of 48 (with the concurrent
// writes below) change neither the wall time nor the writes per Pod of a
// 1000-Pod update (docs/benchmarks.md). The rest goes to the next round,
// which the writes' own watch events bring. Rounds also bring the first
// Pods back while the rest still move: unbounded, a 1000-Pod CloneSet at
// maxUnavailable 100% had its first Pod ready on the new image after about
// 19 s (2000 writes first).
const maxPodsWrittenPerRound = 20

// podWriteConcurrency is how many Pods a round writes at once. An in-place
// move is three requests in a row (a fresh read, the gate, the image) and
// a refresh one. Written one Pod after another, a round's pace is its
// round trips', not the API server's: a 1000-Pod update at maxUnavailable
// 100% moves 29 Pods a second one at a time and 37 eight at once on the
// kwok bed, where eight already keep the API server's CPU busy
// (docs/benchmarks.md, in place against recreate). But with 10 CloneSets
// of 1000 Pods on 4 workers (make bench-scale), eight at once made the
// update 8m16s -> 10m48s, CloneSet status writes 3,379 -> 11,518, manager
// CPU 102 -> 254 s and gate reaction p99 775 -> 1122 ms: so one at a time
// until the concurrency is bounded across workers, not per round.
const podWriteConcurrency = 1

// podWriteBudget is what is left of a round's Pod writes: at most
// maxPodsWrittenPerRound Pods, and, for a CloneSet no Rollout governs,
// none more once handOver says a governed CloneSet's gate event waits for
// a worker (gateWaits). A round always writes its first Pod, so every
// round moves its CloneSet along. The round's concurrent writers share it.
type podWriteBudget struct {
	mu            sync.Mutex
	left, written int
	// handOver claims a waiting gate for this round; nil: never.
	handOver func() bool
	// handedOver is true once handOver ended the round.
	handedOver bool
}

// take reserves one Pod write, or says the round may write no more. When
// handOver answers yes, the round is over: nothing more is taken.
func (b *podWriteBudget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 {
		return false
	}
	if b.written > 0 && b.handOver != nil && b.handOver() {
		b.left, b.handedOver = 0, true
		return false
	}
	b.left--
	return true
}

// settle ends a write taken: counted when it wrote, given back when not.
func (b *podWriteBudget) settle(wrote bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wrote {
		b.written++
	} else if !b.handedOver {
		b.left++
	}
}

// remaining is what the round may still write.
func (b *podWriteBudget) remaining() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left
}

// writePods calls write for the items in order, podWriteConcurrency at a
// time, each only once the budget grants it a write. It stops starting
// items once the budget is spent or a write failed, waits for those
// started, and says whether every item was started. write reports whether
// it wrote; the errors of all the writes come back joined.
func writePods[T any](budget *podWriteBudget, items []T, write func(T) (bool, error)) (all bool, err error) {
	var (
		mu      sync.Mutex
		next    int
		stopped bool
		errs    []error
		wg      sync.WaitGroup
	)
	// claim hands out the next item, or -1 once there is none to start.
	claim := func() int {
		mu.Lock()
		defer mu.Unlock()
		if stopped || next == len(items) || !budget.take() {
			stopped = true
			return -1
		}
		next++
		return next - 1
	}
	for range min(podWriteConcurrency, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := claim(); i >= 0; i = claim() {
				wrote, err := write(items[i])
				budget.settle(wrote)
				if err != nil {
					mu.Lock()
					errs, stopped = append(errs, err), true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return next == len(items), errors.Join(errs...)
}

// podMove is one Pod of the plan to bring to a revision.
type podMove struct {
	pod    string
	target *appsv1.ControllerRevision
}

// limitMoves keeps at most limit moves, updates first, and says whether any
// were left for the next round.
func limitMoves(update, rollback []string, limit int) (updates, rollbacks []string, more bool) {
	if len(update) >= limit {
		return update[:limit], nil, len(update)+len(rollback) > limit
	}
	left := limit - len(update)
	if len(rollback) > left {
		return update, rollback[:left], true
	}
	return update, rollback, false
}

// requeueAfter keeps the soonest positive delay; a round's concurrent Pod
// writers share it.
type requeueAfter struct {
	mu sync.Mutex
	d  time.Duration
}

func (q *requeueAfter) at(d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if d > 0 && (q.d == 0 || d < q.d) {
		q.d = d
	}
}

// soonest is the delay kept; zero: none.
func (q *requeueAfter) soonest() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.d
}
