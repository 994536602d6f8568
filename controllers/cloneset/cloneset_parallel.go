package cloneset

import (
	"sync"
	"sync/atomic"
	"time"
)

// writeParallelism bounds the Pod writes one reconcile has in flight.
// Written one after the other, a round's writes wait on each other's round
// trips (about 110 writes/s on a loaded 2-core test machine, so a round of
// maxMovesPerRound moves, two writes each, held its worker for about a
// second). The API server serves requests in parallel; a small bound keeps
// one CloneSet from taking all of it, and the moves cap already bounds what
// a round starts.
const writeParallelism = 8

// forEachBounded calls f(0), ..., f(n-1) with at most limit calls running
// at once. After a call fails no new call starts, as in a serial loop that
// returns on its first error; calls already running finish. It returns the
// error of the lowest index that failed, nil when none did.
func forEachBounded(n, limit int, f func(i int) error) error {
	if limit < 1 {
		limit = 1
	}
	var (
		failed atomic.Bool
		wg     sync.WaitGroup
		errs   = make([]error, n)
		slots  = make(chan struct{}, limit)
	)
	for i := range n {
		slots <- struct{}{}
		if failed.Load() {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := f(i); err != nil {
				errs[i] = err
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// podTask is one Pod's refresh or move. It gets a round of its own, which
// shares everything read-only with the reconcile's and has its own
// findings; it returns when to look at the Pod again.
type podTask func(round *syncRound) (time.Duration, error)

// writePods runs a round's Pod writes, at most writeParallelism at once,
// and gathers their findings (in order, as a serial loop would) and their
// soonest delay into round and requeue. It returns the error of the first
// write that failed; no write starts after one failed.
func writePods(round *syncRound, requeue *requeueAfter, writes []podTask) error {
	delays := make([]time.Duration, len(writes))
	findings := make([]statusFindings, len(writes))
	err := forEachBounded(len(writes), writeParallelism, func(i int) error {
		own := *round
		own.findings = statusFindings{}
		d, err := writes[i](&own)
		delays[i], findings[i] = d, own.findings
		return err
	})
	for i := range writes {
		round.findings.merge(findings[i])
		requeue.at(delays[i])
	}
	return err
}

// merge takes the findings of one Pod's write: each one set there replaces
// the round's, as the later write of a serial loop would have.
func (f *statusFindings) merge(o statusFindings) {
	for _, field := range []struct {
		dst *string
		src string
	}{
		{&f.failedUpdate, o.failedUpdate},
		{&f.blocked, o.blocked},
		{&f.scaleError, o.scaleError},
		{&f.invalidSpec, o.invalidSpec},
	} {
		if field.src != "" {
			*field.dst = field.src
		}
	}
}
