package cloneset

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestForEachBounded(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		limit int
		fail  map[int]bool
		// wantErr is the index whose error comes back; -1 for none.
		wantErr int
	}{
		{name: "nothing to do", n: 0, limit: 8, wantErr: -1},
		{name: "all run, fewer than the limit", n: 3, limit: 8, wantErr: -1},
		{name: "all run, many more than the limit", n: 50, limit: 8, wantErr: -1},
		{name: "a limit below one runs them one by one", n: 5, limit: 0, wantErr: -1},
		{name: "the first failure by index is returned", n: 20, limit: 4, fail: map[int]bool{7: true, 3: true}, wantErr: 3},
		{name: "serially, nothing after the first failure starts", n: 10, limit: 1, fail: map[int]bool{2: true}, wantErr: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				running, peak atomic.Int32
				mu            sync.Mutex
				ran           = map[int]bool{}
			)
			err := forEachBounded(tt.n, tt.limit, func(i int) error {
				now := running.Add(1)
				defer running.Add(-1)
				for {
					p := peak.Load()
					if now <= p || peak.CompareAndSwap(p, now) {
						break
					}
				}
				time.Sleep(time.Millisecond) // long enough for the others to start
				mu.Lock()
				ran[i] = true
				mu.Unlock()
				if tt.fail[i] {
					return fmt.Errorf("call %d", i)
				}
				return nil
			})
			limit := max(tt.limit, 1)
			if p := int(peak.Load()); p > limit {
				t.Errorf("%d calls ran at once, limit %d", p, limit)
			}
			if tt.wantErr < 0 {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				if len(ran) != tt.n {
					t.Errorf("%d of %d calls ran", len(ran), tt.n)
				}
				if tt.n > limit && int(peak.Load()) < 2 && limit > 1 {
					t.Errorf("calls ran one at a time, limit %d", limit)
				}
				return
			}
			if want := fmt.Sprintf("call %d", tt.wantErr); err == nil || err.Error() != want {
				t.Fatalf("error %v, want %q", err, want)
			}
			if len(ran) == tt.n && tt.n > tt.wantErr+limit {
				t.Errorf("all %d calls ran after a failure; want no new call started after it", tt.n)
			}
			if limit == 1 && len(ran) != tt.wantErr+1 {
				t.Errorf("serially, %d calls ran, want %d (up to the failure)", len(ran), tt.wantErr+1)
			}
		})
	}
}

func TestWritePodsGathersFindingsAndDelays(t *testing.T) {
	tests := []struct {
		name        string
		results     []statusFindings
		delays      []time.Duration
		before      statusFindings
		want        statusFindings
		wantRequeue time.Duration
	}{
		{
			name:        "no write finds anything: the round's findings stay",
			results:     []statusFindings{{}, {}},
			delays:      []time.Duration{0, 3 * time.Second},
			before:      statusFindings{blocked: "blocked before"},
			want:        statusFindings{blocked: "blocked before"},
			wantRequeue: 3 * time.Second,
		},
		{
			name:        "the later write's finding wins, as in a serial loop",
			results:     []statusFindings{{failedUpdate: "pod a"}, {}, {failedUpdate: "pod c", scaleError: "delete c"}},
			delays:      []time.Duration{5 * time.Second, 2 * time.Second, 0},
			want:        statusFindings{failedUpdate: "pod c", scaleError: "delete c"},
			wantRequeue: 2 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			round := &syncRound{findings: tt.before}
			var tasks []podTask
			for i := range tt.results {
				tasks = append(tasks, func(own *syncRound) (time.Duration, error) {
					if own == round || own.findings != (statusFindings{}) {
						return 0, errors.New("a write must get a round of its own, with no findings yet")
					}
					own.findings = tt.results[i]
					return tt.delays[i], nil
				})
			}
			var requeue requeueAfter
			if err := writePods(round, &requeue, tasks); err != nil {
				t.Fatal(err)
			}
			if round.findings != tt.want {
				t.Errorf("findings %+v, want %+v", round.findings, tt.want)
			}
			if requeue.d != tt.wantRequeue {
				t.Errorf("requeue %s, want %s", requeue.d, tt.wantRequeue)
			}
		})
	}
}
