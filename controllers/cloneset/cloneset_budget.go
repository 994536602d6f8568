package cloneset

import (
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
const maxPodsWrittenPerRound = 20

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

// requeueAfter keeps the soonest positive delay.
type requeueAfter struct{ d time.Duration }

func (q *requeueAfter) at(d time.Duration) {
	if d > 0 && (q.d == 0 || d < q.d) {
		q.d = d
	}
}
