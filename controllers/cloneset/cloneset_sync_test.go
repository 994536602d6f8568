package cloneset

import (
	"strconv"
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
			budget := podWriteBudget{left: tt.limit}
			if tt.mayHandOver {
				budget.handOver = func() bool {
					asked++
					claimed := waiting
					waiting = false
					return claimed
				}
			}
			written := 0
			for budget.allow() {
				budget.spend()
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
			if budget.allow() {
				t.Fatal("the round allowed another write after it ended")
			}
			if tt.mayHandOver && tt.gateAfter >= 0 && tt.gateAfter < tt.limit && asked == 0 {
				t.Fatal("the round never asked whether a gate waits")
			}
		})
	}
}
