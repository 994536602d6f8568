package rollback

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	stable = "web-1"
	bad    = "web-2"
)

// pod is "web-<ordinal>" on rev; flags: "u" unavailable, "t" terminating.
func pod(ordinal int, rev string, flags string) Pod {
	name := "web-" + string(rune('0'+ordinal))
	return Pod{Name: name, UID: types.UID("uid-" + name), Ordinal: ordinal, Revision: rev,
		Available: !strings.Contains(flags, "u"), Terminating: strings.Contains(flags, "t")}
}

func names(ps []Pod) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func input(budget int32, pods ...Pod) Input {
	return Input{Pods: pods, Replicas: 4, Target: stable, Stable: stable, Settled: true, MaxUnavailable: budget}
}

func inPlace(in Input) Input {
	in.InPlace = true
	return in
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		canaries string // in rollback order
		delete   string
		blocked  string // substring; "" for none
		done     bool
		message  string // substring
	}{
		{name: "nothing to roll back", in: input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, stable, ""), pod(3, stable, "")),
			done: true, message: "every Pod is back on revision web-1"},
		{name: "the highest ordinal goes first, one at a time", in: input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, "")),
			canaries: "web-3,web-2", delete: "web-3", message: "rolling back 2 canary Pods to revision web-1: web-3 deleted, waiting for it to be ready"},
		{name: "a budget of 2 deletes two", in: input(2, pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, "")),
			canaries: "web-3,web-2", delete: "web-3,web-2", message: "web-3, web-2 deleted, waiting for them to be ready"},
		{name: "a Pod not ready holds the budget", in: input(1, pod(0, stable, "u"), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, "")),
			canaries: "web-3,web-2", delete: "", message: "rolling back 2 canary Pods to revision web-1: waiting for web-0 to be ready"},
		{name: "a missing Pod holds the budget", in: input(1, pod(0, stable, ""), pod(2, bad, ""), pod(3, bad, "")),
			canaries: "web-3,web-2", delete: "", message: "waiting for 1 missing Pod to be created"},
		{name: "a missing StatefulSet Pod is named", in: func() Input {
			in := input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""))
			in.SetName = "web"
			return in
		}(), canaries: "web-2", delete: "", message: "rolling back 1 canary Pod to revision web-1: waiting for web-3 to be created"},
		{name: "a terminating Pod holds the budget and is no canary", in: input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, "t")),
			canaries: "web-2", delete: "", message: "rolling back 1 canary Pod to revision web-1: waiting for web-3 to be ready"},
		{name: "an unavailable canary is deleted even with the budget used", in: input(1, pod(0, stable, "u"), pod(1, stable, ""), pod(2, bad, "u"), pod(3, bad, "")),
			canaries: "web-2,web-3", delete: "web-2"},
		{name: "unavailable canaries first, then the budget", in: input(2, pod(0, stable, ""), pod(1, bad, ""), pod(2, bad, "u"), pod(3, bad, "")),
			canaries: "web-2,web-3,web-1", delete: "web-2,web-3"},
		{name: "Pods of an older canary go back too", in: input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, "web-0", ""), pod(3, bad, "")),
			canaries: "web-3,web-2", delete: "web-3"},
		{name: "names without ordinals are taken by name", in: Input{Replicas: 3, Target: stable, Stable: stable, Settled: true, MaxUnavailable: 1,
			Pods: []Pod{{Name: "web-zz", Ordinal: -1, Revision: bad, Available: true}, {Name: "web-aa", Ordinal: -1, Revision: bad, Available: true}, {Name: "web-mm", Ordinal: -1, Revision: stable, Available: true}}},
			canaries: "web-aa,web-zz", delete: "web-aa"},
		{name: "a budget of 0 still moves one Pod", in: input(0, pod(0, stable, ""), pod(3, bad, ""), pod(1, stable, ""), pod(2, stable, "")),
			canaries: "web-3", delete: "web-3"},
		{name: "not before the workload observed the partition", in: func() Input {
			in := input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, ""))
			in.Settled = false
			return in
		}(), canaries: "web-3,web-2", blocked: "waiting for the workload to observe the partition", message: "rolling back 2 canary Pods to revision web-1: waiting for the workload"},
		{name: "never when Pods would come back on another revision than the stable one", in: func() Input {
			in := input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, ""))
			in.Stable = "web-0"
			return in
		}(), canaries: "web-3,web-2", blocked: "current revision web-1 is not the stable revision web-0"},
		{name: "never without a current revision", in: func() Input {
			in := input(1, pod(3, bad, ""))
			in.Target = ""
			return in
		}(), canaries: "web-3", blocked: "no current revision"},
		{name: "canaries gone, waiting for the last to be ready", in: input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, stable, "u"), pod(3, stable, "")),
			message: "canary Pods deleted, coming back on revision web-1: waiting for web-2 to be ready"},
		{name: "in place: nothing deleted before the workload moves them", in: inPlace(input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, ""))),
			canaries: "web-3,web-2", message: "rolling back 2 canary Pods in place to revision web-1: waiting for the workload to update them"},
		{name: "in place: nothing deleted, past the budget or unsettled", in: func() Input {
			in := inPlace(input(1, pod(0, stable, "u"), pod(1, stable, ""), pod(2, bad, "u"), pod(3, bad, "")))
			in.Settled = false
			in.Stable = "web-0"
			return in
		}(), canaries: "web-2,web-3", message: "rolling back 2 canary Pods in place to revision web-1: waiting for web-0, web-2 to be ready"},
		{name: "in place: the last one back, not ready yet", in: inPlace(input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, stable, "u"), pod(3, stable, ""))),
			message: "canary Pods back in place on revision web-1: waiting for web-2 to be ready"},
		{name: "in place: done", in: inPlace(input(1, pod(0, stable, ""), pod(1, stable, ""), pod(2, stable, ""), pod(3, stable, ""))),
			done: true, message: "every Pod is back on revision web-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.in)
			if got := names(p.Canaries); got != tt.canaries {
				t.Errorf("canaries = %q, want %q", got, tt.canaries)
			}
			if got := names(p.Delete); got != tt.delete {
				t.Errorf("delete = %q, want %q", got, tt.delete)
			}
			if tt.blocked == "" && p.Blocked != "" || !strings.Contains(p.Blocked, tt.blocked) {
				t.Errorf("blocked = %q, want %q", p.Blocked, tt.blocked)
			}
			if tt.blocked != "" && len(p.Delete) > 0 {
				t.Errorf("blocked but deletes %s", names(p.Delete))
			}
			if p.Done() != tt.done {
				t.Errorf("done = %v, want %v", p.Done(), tt.done)
			}
			if !strings.Contains(p.Message(), tt.message) {
				t.Errorf("message = %q, want it to contain %q", p.Message(), tt.message)
			}
		})
	}
}

// TestDecideSequence replays a StatefulSet of 4 rolled back after an abort
// at partition 2, the controller playing the StatefulSet between calls: at
// most one Pod is ever unavailable, each replacement is ready before the
// next deletion, and every Pod ends on the stable revision.
func TestDecideSequence(t *testing.T) {
	pods := []Pod{pod(0, stable, ""), pod(1, stable, ""), pod(2, bad, ""), pod(3, bad, "")}
	find := func(name string) int {
		for i := range pods {
			if pods[i].Name == name {
				return i
			}
		}
		return -1
	}
	type world func()
	terminate := func(name string) world { return func() { pods[find(name)].Terminating = true } }
	gone := func(name string) world {
		return func() { i := find(name); pods = append(pods[:i], pods[i+1:]...) }
	}
	recreate := func(ordinal int) world { return func() { pods = append(pods, pod(ordinal, stable, "u")) } }
	ready := func(name string) world { return func() { pods[find(name)].Available = true } }
	steps := []struct {
		before world
		delete string
		done   bool
	}{
		{delete: "web-3"},
		{before: terminate("web-3")},
		{before: gone("web-3")},
		{before: recreate(3)},
		{before: ready("web-3"), delete: "web-2"},
		{before: terminate("web-2")},
		{before: gone("web-2")},
		{before: recreate(2)},
		{before: ready("web-2"), done: true},
	}
	for i, s := range steps {
		if s.before != nil {
			s.before()
		}
		p := Decide(Input{Pods: append([]Pod(nil), pods...), Replicas: 4, Target: stable, Stable: stable, Settled: true, MaxUnavailable: 1})
		unavailable := len(p.Waiting) + int(p.Missing)
		if unavailable+len(p.Delete) > 1 {
			t.Fatalf("step %d: %d unavailable and %s to delete, budget 1", i, unavailable, names(p.Delete))
		}
		if got := names(p.Delete); got != s.delete {
			t.Fatalf("step %d: delete %q, want %q (%s)", i, got, s.delete, p.Message())
		}
		if p.Done() != s.done {
			t.Fatalf("step %d: done = %v, want %v (%s)", i, p.Done(), s.done, p.Message())
		}
	}
}

func TestDoneMessage(t *testing.T) {
	for _, tt := range []struct {
		in   Input
		took time.Duration
		want string
	}{
		{in: input(1), took: 42*time.Second + 300*time.Millisecond, want: "every Pod is back on revision web-1, 42s after the rollback began"},
		{in: inPlace(input(1)), took: 2600 * time.Millisecond, want: "every Pod is back on revision web-1 in place, 3s after the rollback began"},
		{in: inPlace(input(1)), took: 400 * time.Millisecond, want: "every Pod is back on revision web-1 in place, under 1s after the rollback began"},
	} {
		if got := Decide(tt.in).DoneMessage(tt.took); got != tt.want {
			t.Errorf("DoneMessage(%s) = %q, want %q", tt.took, got, tt.want)
		}
	}
}

func TestOrdinal(t *testing.T) {
	for name, want := range map[string]int{"web-0": 0, "web-12": 12, "web-x7k2p": -1, "web-": -1, "db-3": -1, "web-3-1": -1, "web": -1} {
		if got := Ordinal(name, "web"); got != want {
			t.Errorf("Ordinal(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestAvailable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	readySince := func(status corev1.ConditionStatus, ago time.Duration) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		minReady int32
		want     bool
	}{
		{name: "ready", pod: readySince(corev1.ConditionTrue, 0), want: true},
		{name: "not ready", pod: readySince(corev1.ConditionFalse, time.Minute), want: false},
		{name: "no condition", pod: &corev1.Pod{}, want: false},
		{name: "ready long enough", pod: readySince(corev1.ConditionTrue, 10*time.Second), minReady: 10, want: true},
		{name: "ready too recently", pod: readySince(corev1.ConditionTrue, 9*time.Second), minReady: 10, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Available(tt.pod, tt.minReady, now); got != tt.want {
				t.Errorf("Available = %v, want %v", got, tt.want)
			}
		})
	}
}

// A large workload's round lists its Pods up to a bound, then counts them.
func TestMessageCountsWhatItCannotName(t *testing.T) {
	in := Input{Replicas: 300, Target: stable, Stable: stable, Settled: true, MaxUnavailable: 100}
	for i := range 300 {
		rev := stable
		if i >= 100 {
			rev = bad
		}
		in.Pods = append(in.Pods, Pod{Name: fmt.Sprintf("web-%03d", i), UID: types.UID(fmt.Sprint(i)),
			Ordinal: i, Revision: rev, Available: true})
	}
	p := Decide(in)
	if len(p.Delete) != 100 {
		t.Fatalf("deleting %d, want the budget of 100", len(p.Delete))
	}
	msg := p.Message()
	if len(msg) > 1000 {
		t.Errorf("message is %d bytes, want it bounded: %q", len(msg), msg)
	}
	if !strings.HasPrefix(msg, "rolling back 200 canary Pods to revision web-1: web-299, web-298, ") ||
		!strings.Contains(msg, " more deleted, waiting for them to be ready") {
		t.Errorf("message %q, want the first names and a count of the rest", msg)
	}
}

func TestDeletedNoteTellsARoundInOneNote(t *testing.T) {
	pod := func(name, revision string) Pod { return Pod{Name: name, Revision: revision} }
	tests := []struct {
		name string
		pods []Pod
		want string
	}{{
		name: "one Pod reads as it always did",
		pods: []Pod{pod("db-3", "db-2")},
		want: "deleted canary Pod db-3 (revision db-2) so that StatefulSet db recreates it on stable revision db-1",
	}, {
		name: "a round's Pods in one note, in the order deleted",
		pods: []Pod{pod("db-3", "db-2"), pod("db-1", "db-2")},
		want: "deleted 2 canary Pods (db-3, db-1) (revision db-2) so that StatefulSet db recreates them on stable revision db-1",
	}, {
		name: "canaries of two revisions: one phrase each",
		pods: []Pod{pod("db-3", "db-3r"), pod("db-2", "db-2r"), pod("db-1", "db-3r")},
		want: "deleted 2 canary Pods (db-3, db-1) (revision db-3r) so that StatefulSet db recreates them on stable revision db-1; " +
			"deleted canary Pod db-2 (revision db-2r) so that StatefulSet db recreates it on stable revision db-1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DeletedNote(tt.pods, "StatefulSet db", "db-1"); got != tt.want {
				t.Errorf("DeletedNote:\n got %q\nwant %q", got, tt.want)
			}
		})
	}

	var many []Pod
	for i := range 40 {
		many = append(many, pod(fmt.Sprintf("%s-%02d", strings.Repeat("w", 60), i), "w-2"))
	}
	got := DeletedNote(many, "CloneSet "+strings.Repeat("w", 60), "w-1")
	if len(got) >= 1024 || !strings.HasPrefix(got, "deleted 40 canary Pods (") || !strings.Contains(got, " more) (revision w-2)") {
		t.Errorf("DeletedNote of 40 long names is %d bytes, want under 1024 with the count whole: %q", len(got), got)
	}
}
