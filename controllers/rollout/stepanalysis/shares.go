package stepanalysis

import (
	"fmt"
	"sync"
	"time"
)

// DeferRetry is when a round that was refused its namespace's share looks
// again. Such a round costs no query, only cache reads, so a short retry
// keeps the wait for a free share short without loading the manager.
const DeferRetry = 2 * time.Second

// ShareOf is how many rounds of one namespace may measure at once, given
// the Rollout workers: a quarter of them, at least one. A measuring round
// holds its worker until its queries answer, up to the analysis interval
// (at most MaxQueryTime), so one namespace whose Prometheus never answers
// holds at most a quarter of the workers: three quarters stay for the
// other namespaces, which it would take four such namespaces at once to
// hold up. A quarter of the default 16 workers is 4 rounds of up to 10
// metrics each, far more than an honest namespace's queries, which answer
// in milliseconds, keep busy.
func ShareOf(workers int) int {
	return max(1, workers/4)
}

// Shares counts the rounds measuring in each namespace, so that one
// namespace takes at most its share of the Rollout workers. Taking a share
// never waits: a worker is never held for a namespace's turn. A namespace
// is counted only while it measures: its entry goes when its last round
// ends, so what Shares holds is bounded by the workers, whatever the
// number of namespaces.
type Shares struct {
	per, workers int

	mu       sync.Mutex
	inFlight map[string]int
}

// NewShares shares workers among namespaces, ShareOf(workers) each.
func NewShares(workers int) *Shares {
	return &Shares{per: ShareOf(workers), workers: workers, inFlight: map[string]int{}}
}

// Take takes one of namespace's shares. It returns the function that gives
// it back, or, when the namespace already measures its share, nil and why
// the round is deferred. A nil *Shares takes nothing and refuses nothing.
func (s *Shares) Take(namespace string) (release func(), refused string) {
	if s == nil {
		return func() {}, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.inFlight[namespace]; n >= s.per {
		return nil, fmt.Sprintf("namespace %s already has %d analysis rounds measuring, its share of the manager's %d Rollout workers; retried in %s",
			namespace, n, s.workers, DeferRetry)
	}
	s.inFlight[namespace]++
	var once sync.Once
	return func() { once.Do(func() { s.give(namespace) }) }, ""
}

func (s *Shares) give(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[namespace]--; s.inFlight[namespace] <= 0 {
		delete(s.inFlight, namespace)
	}
}

// InFlight is the rounds of namespace measuring now.
func (s *Shares) InFlight(namespace string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight[namespace]
}

// Namespaces is how many namespaces measure now.
func (s *Shares) Namespaces() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inFlight)
}
