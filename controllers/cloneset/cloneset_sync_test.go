package cloneset

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func TestLimitMoves(t *testing.T) {
	names := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, prefix+strconv.Itoa(i))
		}
		return out
	}
	tests := []struct {
		name                     string
		update, rollback         int
		wantUpdate, wantRollback int
		wantMore                 bool
	}{
		{name: "under the limit: all", update: 3, rollback: 2, wantUpdate: 3, wantRollback: 2},
		{name: "exactly the limit: all, none left", update: 5, wantUpdate: 5},
		{name: "updates over the limit: the first ones", update: 12, wantUpdate: 5, wantMore: true},
		{name: "updates fill the round, rollbacks wait", update: 5, rollback: 1, wantUpdate: 5, wantMore: true},
		{name: "rollbacks take what updates leave", update: 2, rollback: 7, wantUpdate: 2, wantRollback: 3, wantMore: true},
		{name: "nothing to move", wantUpdate: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, r := names("u", tt.update), names("r", tt.rollback)
			gotU, gotR, more := limitMoves(u, r, 5)
			if len(gotU) != tt.wantUpdate || len(gotR) != tt.wantRollback || more != tt.wantMore {
				t.Fatalf("got %d updates, %d rollbacks, more %v; want %d, %d, %v", len(gotU), len(gotR), more, tt.wantUpdate, tt.wantRollback, tt.wantMore)
			}
			for i := range gotU {
				if gotU[i] != u[i] {
					t.Errorf("update %d is %s, want %s: the plan's order is kept", i, gotU[i], u[i])
				}
			}
		})
	}
}

// TestPodWriteBudget: a round writes at most its limit; a round that may
// hand over its worker writes its first Pod whatever waits, and no more
// once a gate waits.
func TestPodWriteBudget(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		// mayHandOver is whether the round's CloneSet is ungoverned.
		mayHandOver bool
		// gateAfter is how many Pods the round has written when a gate
		// event starts to wait; -1 for never.
		gateAfter int
		want      int
	}{
		{name: "no gate: the limit", limit: 5, mayHandOver: true, gateAfter: -1, want: 5},
		{name: "a gate waits from the start: the first Pod only", limit: 5, mayHandOver: true, gateAfter: 0, want: 1},
		{name: "a gate comes after three Pods: three", limit: 5, mayHandOver: true, gateAfter: 3, want: 3},
		{name: "a gate comes as the limit is reached: the limit", limit: 5, mayHandOver: true, gateAfter: 5, want: 5},
		{name: "a governed round does not hand over", limit: 5, mayHandOver: false, gateAfter: 0, want: 5},
		{name: "no budget: nothing, gate or not", limit: 0, mayHandOver: true, gateAfter: 0, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waiting := tt.gateAfter == 0
			asked := 0
			budget := &podWriteBudget{left: tt.limit}
			if tt.mayHandOver {
				budget.handOver = func() bool {
					asked++
					claimed := waiting
					waiting = false
					return claimed
				}
			}
			written := 0
			for budget.take() {
				budget.settle(true)
				written++
				if written == tt.gateAfter {
					waiting = true
				}
				if written > tt.limit {
					t.Fatalf("wrote %d Pods, more than the limit %d", written, tt.limit)
				}
			}
			if written != tt.want {
				t.Fatalf("wrote %d Pods, want %d", written, tt.want)
			}
			if budget.take() {
				t.Fatal("the round allowed another write after it ended")
			}
			if tt.mayHandOver && tt.gateAfter >= 0 && tt.gateAfter < tt.limit && asked == 0 {
				t.Fatal("the round never asked whether a gate waits")
			}
		})
	}
}

func TestWritePods(t *testing.T) {
	items := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	t.Run("the budget bounds the writes, and writes that wrote nothing give theirs back", func(t *testing.T) {
		budget := &podWriteBudget{left: 10}
		var mu sync.Mutex
		wrote := map[int]bool{}
		// Every third item has nothing to write (a refresh of a settled Pod).
		all, err := writePods(budget, items(100), func(i int) (bool, error) {
			if i%3 == 0 {
				return false, nil
			}
			mu.Lock()
			defer mu.Unlock()
			wrote[i] = true
			return true, nil
		})
		if err != nil || all {
			t.Fatalf("got all=%v err=%v; want some items left for the next round and no error", all, err)
		}
		if len(wrote) != 10 || budget.remaining() != 0 {
			t.Fatalf("wrote %d Pods with %d left; want exactly the budget of 10 and none left", len(wrote), budget.remaining())
		}
	})
	t.Run("at most podWriteConcurrency at once, and every item when the budget allows", func(t *testing.T) {
		budget := &podWriteBudget{left: 100}
		var inFlight, most atomic.Int32
		release := make(chan struct{})
		go func() {
			// Let the writers pile up before any finishes.
			for inFlight.Load() < podWriteConcurrency {
				runtime.Gosched()
			}
			close(release)
		}()
		var done atomic.Int32
		all, err := writePods(budget, items(50), func(int) (bool, error) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			inFlight.Add(-1)
			done.Add(1)
			return true, nil
		})
		if err != nil || !all || done.Load() != 50 {
			t.Fatalf("got all=%v err=%v done=%d; want all 50 written", all, err, done.Load())
		}
		if most.Load() != podWriteConcurrency {
			t.Fatalf("at most %d writes at once, want %d", most.Load(), podWriteConcurrency)
		}
	})
	t.Run("a failed write stops the round and its error comes back", func(t *testing.T) {
		budget := &podWriteBudget{left: 100}
		var started atomic.Int32
		boom := errors.New("boom")
		all, err := writePods(budget, items(1000), func(i int) (bool, error) {
			started.Add(1)
			if i == 3 {
				return false, boom
			}
			return true, nil
		})
		if !errors.Is(err, boom) || all {
			t.Fatalf("got all=%v err=%v; want the write's error and items left", all, err)
		}
		if n := started.Load(); n > 3+podWriteConcurrency+1 {
			t.Fatalf("%d items started; after a failure no more than those already claimed may run", n)
		}
	})
	t.Run("no items: nothing taken", func(t *testing.T) {
		budget := &podWriteBudget{left: 1}
		all, err := writePods(budget, nil, func(int) (bool, error) { return true, nil })
		if !all || err != nil || budget.remaining() != 1 {
			t.Fatalf("got all=%v err=%v left=%d", all, err, budget.remaining())
		}
	})
}
