package cloneset

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// maxPodsWrittenPerRound bounds the Pods one reconcile writes: refreshes
// (one write each) and moves (two writes in a row). A worker holds one
// CloneSet until its round ends: with 10 CloneSets of 1000 Pods updating
// at once on 4 workers, rounds of 50 moves or of hundreds of refreshes
// held every worker for seconds, while a CloneSet whose Rollout waited on
// it sat at the head of the queue (cloneset_priority.go). Such a wait now
// ends a round sooner (gateWaits); the bound still keeps each round short.
// 20 Pods is at most 40 writes, about a second on an API server that
// answers a write in 25 ms (0.8-2.7 s measured at 10,800 Pods); rounds of
// 10 were slower overall
// (docs/benchmarks.md). The rest goes to the next round, which the writes'
// own watch events bring. Rounds also bring the first Pods back while the
// rest still move: unbounded, a 1000-Pod CloneSet at maxUnavailable 100%
// had its first Pod ready on the new image after about 19 s (2000 writes
// first).
const maxPodsWrittenPerRound = 50

// podWriteBudget is what is left of a round's Pod writes: at most
// maxPodsWrittenPerRound Pods, and, for a CloneSet no Rollout governs,
// none more once handOver says a governed CloneSet's gate event waits for
// a worker (gateWaits). A round always writes its first Pod, so every
// round moves its CloneSet along.
type podWriteBudget struct {
	left, written int
	// handOver claims a waiting gate for this round; nil: never.
	handOver func() bool
	// handedOver is true once handOver ended the round.
	handedOver bool
}

// allow says whether the round may write one more Pod. When handOver
// answers yes, the round is over: nothing more is allowed.
func (b *podWriteBudget) allow() bool {
	if b.left <= 0 {
		return false
	}
	if b.written > 0 && b.handOver != nil && b.handOver() {
		b.left, b.handedOver = 0, true
		return false
	}
	return true
}

// spend counts one Pod written.
func (b *podWriteBudget) spend() {
	b.left--
	b.written++
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

// podWritesInFlight bounds the Pod writes one round has in flight at once.
// A round's Pods are independent of each other, and the API server answers
// many writes at once about as fast as one: written one after another, the
// 3,000 writes of a 1,000-Pod update took 26 s, longer than a Deployment
// recreating the same Pods with its writes in parallel (docs/bench-compare.md).
// Each Pod's own writes stay in order.
const podWritesInFlight = 8

// podWrites runs a round's Pod writes, at most podWritesInFlight at once.
// The first error stops new writes from starting; wait returns it once
// those in flight are done, with the soonest delay any of them asked for.
type podWrites struct {
	ctx     context.Context
	slots   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	requeue requeueAfter
}

func newPodWrites(ctx context.Context) *podWrites {
	return &podWrites{ctx: ctx, slots: make(chan struct{}, podWritesInFlight)}
}

// failed says whether a write has failed (or the context ended), so the
// caller starts no more.
func (w *podWrites) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil || w.ctx.Err() != nil
}

// start runs write once a slot is free.
func (w *podWrites) start(write func() (time.Duration, error)) {
	w.slots <- struct{}{}
	w.wg.Add(1)
	go func() {
		defer func() { <-w.slots; w.wg.Done() }()
		delay, err := write()
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil && w.err == nil {
			w.err = err
		}
		w.requeue.at(delay)
	}()
}

// wait waits for the writes started and returns the first error and the
// soonest delay asked for.
func (w *podWrites) wait() (time.Duration, error) {
	w.wg.Wait()
	if w.err == nil && w.ctx.Err() != nil {
		return w.requeue.d, w.ctx.Err()
	}
	return w.requeue.d, w.err
}
