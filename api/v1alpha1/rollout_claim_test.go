package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClaimantIsTheOldestRolloutNotBeingDeleted(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ro := func(name string, created time.Duration, deleting bool) Rollout {
		r := Rollout{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created))}}
		if deleting {
			now := metav1.NewTime(t0.Add(time.Hour))
			r.DeletionTimestamp = &now
		}
		return r
	}
	tests := []struct {
		name     string
		rollouts []Rollout
		want     string // "" for none
	}{
		{name: "none", want: ""},
		{name: "alone", rollouts: []Rollout{ro("web", 0, false)}, want: "web"},
		{name: "the oldest wins whatever the order", rollouts: []Rollout{ro("b", 2*time.Second, false), ro("c", time.Second, false), ro("a", 3*time.Second, false)}, want: "c"},
		{name: "the same second: the name decides", rollouts: []Rollout{ro("web-b", 0, false), ro("web-a", 0, false)}, want: "web-a"},
		{name: "one being deleted does not count", rollouts: []Rollout{ro("old", 0, true), ro("new", time.Second, false)}, want: "new"},
		{name: "all being deleted", rollouts: []Rollout{ro("old", 0, true)}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if c := Claimant(tt.rollouts); c != nil {
				got = c.Name
			}
			if got != tt.want {
				t.Errorf("Claimant = %q, want %q", got, tt.want)
			}
			// Any order of the same Rollouts gives the same answer.
			reversed := make([]Rollout, len(tt.rollouts))
			for i := range tt.rollouts {
				reversed[len(tt.rollouts)-1-i] = tt.rollouts[i]
			}
			if c := Claimant(reversed); (c == nil) != (got == "") || c != nil && c.Name != got {
				t.Errorf("Claimant of the reversed list = %v, want %q", c, got)
			}
		})
	}
}
