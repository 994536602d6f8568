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
