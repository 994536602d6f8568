package plan

import (
	"slices"
	"strings"
)

// bucket is where a Pod stands relative to the two revisions.
type bucket int

const (
	// bucketCurrent: on CurrentRevision. When CurrentRevision equals
	// UpdateRevision there is nothing to roll back to, and every Pod not on
	// UpdateRevision lands here, as Kruise's "old" Pods.
	bucketCurrent bucket = iota
	// bucketUpdate: on UpdateRevision.
	bucketUpdate
	// bucketStale: on a third revision, left by a template change during an
	// update. Wanted nowhere: moved forward or back, or deleted first.
	bucketStale
	numBuckets
)

// tally counts Pods per bucket.
type tally [numBuckets]int

// podState is one active Pod as the planner sees it.
type podState struct {
	pod    *Pod
	bucket bucket
	// available: counts toward the floor, so touching it spends budget.
	available bool
}

// budget is how many available Pods may still be taken out of service:
// available Pods minus the floor replicas - maxUnavailable. Surge Pods raise
// it once available; missing and terminating Pods lower it.
type budget int

// spend takes p out of service if the budget allows. Pods that are not
// available cost nothing: they already count as unavailable.
func (b *budget) spend(p *podState) bool {
	if !p.available {
		return true
	}
	if *b <= 0 {
		return false
	}
	*b--
	return true
}

// moves says how many Pods should change revision, from the per-bucket
// counts. Forward moves take Pods on a third revision and Pods on the
// current revision beyond the partition; rollbacks take what forward left on
// a third revision and Pods on the update revision beyond replicas -
// partition. Both can be non-zero only when third-revision Pods exist, and
// then both draw only on those.
type moves struct {
	forward, rollback int
	// curSurplus and updSurplus cap how many Pods of each revision may
	// move: moving more would undershoot the other side of the partition.
	curSurplus, updSurplus int
}

func wantedMoves(t tally, l limits, rollbackOK bool) moves {
	wantUpd, wantCur := l.replicas-l.partition, l.partition
	needUpd := max(0, wantUpd-t[bucketUpdate])
	needCur := 0
	if rollbackOK {
		needCur = max(0, wantCur-t[bucketCurrent])
	}
	m := moves{
		curSurplus: max(0, t[bucketCurrent]-wantCur),
		updSurplus: max(0, t[bucketUpdate]-wantUpd),
	}
	m.forward = min(needUpd, t[bucketStale]+m.curSurplus)
	if needCur > 0 {
		// needCur > 0 means no current surplus, so forward drew only on
		// third-revision Pods; the rest of them may go back.
		m.rollback = min(needCur, t[bucketStale]-m.forward+m.updSurplus)
	}
	return m
}

// Calculate plans one reconcile of a CloneSet: which Pods to create, delete,
// update and roll back. It is pure: same input, same plan. The steps, in
// order:
//
//  1. take a census of the active Pods by revision; count the budget;
//  2. count the moves the partition wants and the surge they may use;
//  3. scale: create up to replicas + surge, or pick surplus Pods to delete;
//  4. delete: Pods named for deletion first, then the picked surplus, as
//     the budget allows;
//  5. move: pick Pods to update and roll back, in order, as the budget
//     allows;
//  6. release held Pods whose move nothing wants any more;
//  7. say whether progress is blocked by Pods that are not ours.
func Calculate(in Input) Plan {
	l := resolveLimits(in)
	p := Plan{ExpectedUpdatedReplicas: int32(l.replicas - l.partition)}
	currentRev := in.CurrentRevision
	if currentRev == "" {
		currentRev = in.UpdateRevision
	}
	rollbackOK := currentRev != in.UpdateRevision

	// 1. Census and budget.
	c := takeCensus(in.Pods, currentRev, in.UpdateRevision)
	left := budget(c.available - (l.replicas - l.maxUnavailable))

	// 2. Moves and surge. Surge is spent in the direction of the moves: new
	// Pods on the update revision for an update, on the current revision for
	// a rollback. It shrinks as the moves get done, which is what deletes
	// the surplus at the end.
	var want moves
	if !in.Paused {
		want = wantedMoves(c.count, l, rollbackOK)
	}
	surgeUpd := min(l.maxSurge, want.forward)
	surgeCur := min(l.maxSurge-surgeUpd, want.rollback)
	target := l.replicas + surgeUpd + surgeCur

	// 3. Scale.
	var surplus []*podState
	if n := target - len(c.kept); n > 0 {
		if l.scaleLimited {
			n = min(n, max(0, l.scaleMaxUnavailable-c.keptUnavailable))
		}
		// Fill the current revision up to the partition (plus its surge)
		// counting the planned rollbacks, so creation never undoes a move.
		nCur := 0
		if rollbackOK {
			nCur = min(n, max(0, l.partition+surgeCur-(c.count[bucketCurrent]+want.rollback)))
		}
		p.CreateCurrentRevision = int32(nCur)
		p.CreateUpdateRevision = int32(n - nCur)
	} else if n < 0 {
		// Each revision may lose only what it holds beyond its share, so
		// a scale-down never breaks the partition; the shares add up to
		// the target, so the caps always leave enough to pick from.
		surplus = pickSurplus(c.kept, -n, tally{
			bucketCurrent: max(0, c.count[bucketCurrent]-(l.partition+surgeCur)),
			bucketUpdate:  max(0, c.count[bucketUpdate]-(l.replicas-l.partition+surgeUpd)),
			bucketStale:   c.count[bucketStale],
		})
	}
	doomed := map[*podState]bool{}
	for _, s := range surplus {
		doomed[s] = true
		c.count[s.bucket]--
	}

	// 4. Delete. A doomed Pod the budget cannot afford now stays doomed:
	// it is not worth moving a Pod that a later round deletes.
	for _, s := range c.specified {
		if left.spend(s) {
			p.Delete = append(p.Delete, Deletion{Name: s.pod.Name, Reason: ReasonSpecifiedDelete})
		}
	}
	surgeNamed := 0
	if rollbackOK {
		surgeNamed = min(len(surplus), l.specMaxSurge)
	}
	for i, s := range surplus {
		if !left.spend(s) {
			continue
		}
		reason := ReasonScaleDown
		if i >= len(surplus)-surgeNamed {
			reason = ReasonSurgeCleanup
		}
		p.Delete = append(p.Delete, Deletion{Name: s.pod.Name, Reason: reason})
	}

	// 5. Move. Counts after the picked deletions give the same numbers as
	// before (deletions only remove surplus) but the right caps. Release
	// (step 6) judges by the moves wanted were the CloneSet not paused: a
	// pause delays a held Pod's move, it does not cancel it.
	want = wantedMoves(c.count, l, rollbackOK)
	p.Release = release(c.kept, doomed, want)
	if in.Paused {
		return p
	}
	// A Pod in the middle of an update can be moved again: it is already
	// unavailable, so it costs no budget, and the engine retargets it at
	// once. Waiting for it instead would leave a Pod whose new image never
	// becomes ready (image pull failure, crash loop) on that image forever,
	// through an abort and a git revert alike.
	var movable []*podState
	for _, s := range c.kept {
		if !doomed[s] {
			movable = append(movable, s)
		}
	}
	order := newSorter(in.PriorityStrategy, in.ScatterStrategy)
	moved := map[*podState]bool{}
	p.Update = pick(order.updateOrder(filter(movable, moved, bucketCurrent, bucketStale)), want.forward,
		tally{bucketCurrent: want.curSurplus, bucketStale: c.count[bucketStale]}, &left, moved)
	p.Rollback = pick(order.rollbackOrder(filter(movable, moved, bucketUpdate, bucketStale)), want.rollback,
		tally{bucketUpdate: want.updSurplus, bucketStale: c.count[bucketStale]}, &left, moved)

	// 7. Blocked: moves wanted, no budget, and nothing at all planned. A
	// round that creates or deletes Pods is making its own progress.
	if want.forward+want.rollback > 0 && left <= 0 && isEmpty(p) {
		p.Blocked = blocked(in.Pods, l, c.available)
	}
	return p
}

// release names the held Pods that no move can pick: a Pod on the update
// revision is picked only by a rollback that may take update-revision Pods,
// one on the current revision only by an update that may take
// current-revision Pods. Doomed Pods are left to their deletion.
func release(kept []*podState, doomed map[*podState]bool, want moves) []string {
	var names []string
	for _, s := range kept {
		if !s.pod.Held || doomed[s] {
			continue
		}
		switch s.bucket {
		case bucketUpdate:
			if want.rollback == 0 || want.updSurplus == 0 {
				names = append(names, s.pod.Name)
			}
		case bucketCurrent:
			if want.forward == 0 || want.curSurplus == 0 {
				names = append(names, s.pod.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// census is the active Pods as the planner counts them.
type census struct {
	// kept are the Pods that count as replicas: active and not named for
	// deletion.
	kept []*podState
	// specified are the active Pods named for deletion, by name.
	specified []*podState
	// count is kept per bucket.
	count tally
	// available counts every active available Pod, named ones included:
	// until deleted they serve.
	available int
	// keptUnavailable counts kept Pods that are not available, for
	// scaleStrategy.maxUnavailable.
	keptUnavailable int
}

func takeCensus(pods []Pod, currentRev, updateRev string) census {
	var c census
	for i := range pods {
		pod := &pods[i]
		if pod.Terminating {
			continue
		}
		s := &podState{
			pod:       pod,
			bucket:    bucketOf(pod.Revision, currentRev, updateRev),
			available: pod.Ready && pod.Available && !pod.Updating,
		}
		if s.available {
			c.available++
		}
		if pod.SpecifiedDelete {
			// Going away whatever happens: not one of the kept replicas,
			// so its replacement is created now.
			c.specified = append(c.specified, s)
			continue
		}
		if !s.available {
			c.keptUnavailable++
		}
		c.kept = append(c.kept, s)
		c.count[s.bucket]++
	}
	slices.SortFunc(c.specified, func(x, y *podState) int { return strings.Compare(x.pod.Name, y.pod.Name) })
	return c
}

// pickSurplus picks excess Pods to delete, cheapest loss first, taking at
// most caps[b] from bucket b.
func pickSurplus(kept []*podState, excess int, caps tally) []*podState {
	var out []*podState
	for _, s := range deletionOrder(kept) {
		if len(out) == excess {
			break
		}
		if caps[s.bucket] > 0 {
			caps[s.bucket]--
			out = append(out, s)
		}
	}
	return out
}

func bucketOf(rev, current, update string) bucket {
	switch {
	case rev == update:
		return bucketUpdate
	case rev == current || current == update:
		return bucketCurrent
	default:
		return bucketStale
	}
}

// filter keeps the Pods in the given buckets that were not moved yet.
func filter(pods []*podState, moved map[*podState]bool, buckets ...bucket) []*podState {
	var out []*podState
	for _, s := range pods {
		if !moved[s] && slices.Contains(buckets, s.bucket) {
			out = append(out, s)
		}
	}
	return out
}

// pick takes up to n Pods in order, within the per-bucket caps, as the
// budget allows. An available Pod the budget cannot afford is skipped, not
// a stop: a later Pod may be unavailable and free.
func pick(ordered []*podState, n int, caps tally, left *budget, moved map[*podState]bool) []string {
	var names []string
	for _, s := range ordered {
		if len(names) == n {
			break
		}
		if caps[s.bucket] == 0 || !left.spend(s) {
			continue
		}
		caps[s.bucket]--
		moved[s] = true
		names = append(names, s.pod.Name)
	}
	return names
}

// isEmpty: the plan changes nothing.
func isEmpty(p Plan) bool {
	return p.CreateUpdateRevision == 0 && p.CreateCurrentRevision == 0 &&
		len(p.Delete) == 0 && len(p.Update) == 0 && len(p.Rollback) == 0 && len(p.Release) == 0
}
