package cloneset

import (
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestGovernance(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rollout := func(name, target string, age time.Duration, grant *stepwisev1.PartitionGrant) stepwisev1.Rollout {
		return stepwisev1.Rollout{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
			Spec: stepwisev1.RolloutSpec{WorkloadRef: stepwisev1.WorkloadReference{
				APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: target}},
			Status: stepwisev1.RolloutStatus{PartitionGrant: grant},
		}
	}
	grant := func(rev, p string) *stepwisev1.PartitionGrant {
		return &stepwisev1.PartitionGrant{Revision: rev, Partition: intstr.Parse(p)}
	}
	spec := intstr.FromInt32(0)
	tests := []struct {
		name      string
		rollouts  []stepwisev1.Rollout
		previous  *stepwisev1.CloneSetGovernor
		update    string
		want      string // the partition applied
		governor  string
		reconcile bool   // Reconciling while the revision waits
		condition string // the Governed condition's reason, "" when none
	}{
		{name: "no Rollout: the spec's partition", update: "web-2", want: "0"},
		{name: "a Rollout of another CloneSet does not govern", rollouts: []stepwisev1.Rollout{rollout("api", "api", time.Hour, grant("web-2", "0"))},
			update: "web-2", want: "0"},
		{name: "the grant for the update revision applies, whatever the spec says", rollouts: []stepwisev1.Rollout{rollout("web", "web", time.Hour, grant("web-2", "60%"))},
			update: "web-2", want: "60%", governor: "web", condition: stepwisev1.ReasonGovernedByRollout},
		{name: "an update revision not acknowledged moves no Pod", rollouts: []stepwisev1.Rollout{rollout("web", "web", time.Hour, grant("web-1", "0"))},
			update: "web-2", want: "100%", governor: "web", reconcile: true, condition: stepwisev1.ReasonGovernedByRollout},
		{name: "before the Rollout's first decision no Pod moves", rollouts: []stepwisev1.Rollout{rollout("web", "web", time.Hour, nil)},
			update: "web-1", want: "100%", governor: "web", reconcile: true, condition: stepwisev1.ReasonGovernedByRollout},
		{name: "an abort keeps every Pod back on the canary's grant", rollouts: []stepwisev1.Rollout{rollout("web", "web", time.Hour, grant("web-2", "100%"))},
			update: "web-2", want: "100%", governor: "web", condition: stepwisev1.ReasonGovernedByRollout},
		{name: "of two Rollouts the older governs", rollouts: []stepwisev1.Rollout{
			rollout("young", "web", time.Minute, grant("web-2", "0")), rollout("old", "web", time.Hour, grant("web-2", "50%"))},
			update: "web-2", want: "50%", governor: "old", condition: stepwisev1.ReasonGovernedByRollout},
		{name: "a Rollout gone gives the spec's partition back, and says so", previous: &stepwisev1.CloneSetGovernor{Name: "web", Revision: "web-2", Partition: intstr.FromString("60%")},
			update: "web-2", want: "0", condition: stepwisev1.ReasonRolloutGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 3}}
			cs.Spec.UpdateStrategy.Partition = &spec
			cs.Status.Rollout = tt.previous
			g := governanceOf(cs, tt.rollouts)
			if got := g.partition(&spec, tt.update); got.String() != tt.want {
				t.Errorf("partition %s, want %s", got.String(), tt.want)
			}
			gov := g.governor(tt.update)
			if got := ""; gov != nil {
				got = gov.Name
				if got != tt.governor {
					t.Errorf("governor %q, want %q", got, tt.governor)
				}
				if gov.Partition.String() != tt.want {
					t.Errorf("status.rollout.partition %s, want %s", gov.Partition.String(), tt.want)
				}
			} else if tt.governor != "" {
				t.Errorf("no governor, want %q", tt.governor)
			}
			if got := g.awaiting(tt.update) != ""; got != tt.reconcile {
				t.Errorf("awaiting %q, want it %v", g.awaiting(tt.update), tt.reconcile)
			}
			status := stepwisev1.CloneSetStatus{UpdateRevision: tt.update}
			g.setGovernedCondition(&status, &spec, cs.Generation)
			c := apimeta.FindStatusCondition(status.Conditions, stepwisev1.GovernedCondition)
			switch {
			case tt.condition == "" && c != nil:
				t.Errorf("Governed condition %+v, want none", c)
			case tt.condition != "" && (c == nil || c.Reason != tt.condition):
				t.Errorf("Governed condition %+v, want reason %s", c, tt.condition)
			case c != nil && tt.governor != "" && !strings.Contains(c.Message, "Rollout "+tt.governor+" decides how far Pods move") ||
				c != nil && !strings.Contains(c.Message, "spec.updateStrategy.partition (0)"):
				t.Errorf("Governed message %q", c.Message)
			}
		})
	}
}

// TestGracePeriodBehindAGateway: while the governing Rollout routes traffic
// through a Gateway, the engine waits at least gatewayDrainSeconds between
// taking a Pod out of its endpoints and patching its image, whatever the
// spec says; a longer spec wins; without trafficRouting the spec applies.
func TestGracePeriodBehindAGateway(t *testing.T) {
	rollout := func(routing *stepwisev1.TrafficRouting) []stepwisev1.Rollout {
		return []stepwisev1.Rollout{{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: stepwisev1.RolloutSpec{
				WorkloadRef:    stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"},
				TrafficRouting: routing,
			},
		}}
	}
	routed := &stepwisev1.TrafficRouting{StableService: "web", HTTPRoutes: []stepwisev1.HTTPRouteReference{{Name: "web"}}}
	tests := []struct {
		name     string
		rollouts []stepwisev1.Rollout
		spec     int32
		want     int32
	}{
		{name: "no Rollout: the spec's default 0", want: 0},
		{name: "a Rollout without traffic routing: the spec's", rollouts: rollout(nil), spec: 1, want: 1},
		{name: "routed through a Gateway: at least the drain", rollouts: rollout(routed), want: gatewayDrainSeconds},
		{name: "routed, a longer spec wins", rollouts: rollout(routed), spec: 10, want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
			if got := governanceOf(cs, tt.rollouts).gracePeriodSeconds(tt.spec); got != tt.want {
				t.Errorf("grace period %d s, want %d s", got, tt.want)
			}
		})
	}
}

// TestReleasing: a governed CloneSet reads as Reconciling while its Rollout
// moves Pods to a revision it has not promoted, so that no health check
// passes mid-release on the CloneSet (issue 36); held or promoted, it does
// not.
func TestReleasing(t *testing.T) {
	rollout := func(stable string, grant *stepwisev1.PartitionGrant) []stepwisev1.Rollout {
		return []stepwisev1.Rollout{{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: stepwisev1.RolloutSpec{WorkloadRef: stepwisev1.WorkloadReference{
				APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"}},
			Status: stepwisev1.RolloutStatus{StableRevision: stable, PartitionGrant: grant},
		}}
	}
	grant := func(rev, p string) *stepwisev1.PartitionGrant {
		return &stepwisev1.PartitionGrant{Revision: rev, Partition: intstr.Parse(p)}
	}
	for _, tt := range []struct {
		name     string
		rollouts []stepwisev1.Rollout
		update   string
		want     bool
	}{
		{name: "no Rollout", update: "web-2"},
		{name: "at a step", rollouts: rollout("web-1", grant("web-2", "90%")), update: "web-2", want: true},
		{name: "last step, before the promotion", rollouts: rollout("web-1", grant("web-2", "0")), update: "web-2", want: true},
		{name: "promoted", rollouts: rollout("web-2", grant("web-2", "0")), update: "web-2"},
		{name: "aborted: every Pod held back", rollouts: rollout("web-1", grant("web-2", "100%")), update: "web-2"},
		{name: "not acknowledged yet: awaiting says so", rollouts: rollout("web-1", grant("web-1", "0")), update: "web-2"},
		{name: "fast path back to the stable revision", rollouts: rollout("web-1", grant("web-1", "0")), update: "web-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
			msg := governanceOf(cs, tt.rollouts).releasing(tt.update)
			if (msg != "") != tt.want {
				t.Errorf("releasing %q, want it %v", msg, tt.want)
			}
			if tt.want && !strings.Contains(msg, "Rollout web") {
				t.Errorf("message %q does not name the Rollout", msg)
			}
		})
	}
}

// TestGovernorChangedOnPromotion: the promotion changes only the Rollout's
// stable revision (the grant stays {revision, 0}), and the CloneSet must
// hear of it to stop reporting AwaitingRollout.
func TestGovernorChangedOnPromotion(t *testing.T) {
	grant := &stepwisev1.PartitionGrant{Revision: "web-2", Partition: intstr.FromInt32(0)}
	before := &stepwisev1.Rollout{Status: stepwisev1.RolloutStatus{StableRevision: "web-1", PartitionGrant: grant}}
	after := before.DeepCopy()
	if governorChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after}) {
		t.Error("an unchanged Rollout passed the predicate")
	}
	after.Status.StableRevision = "web-2"
	if !governorChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after}) {
		t.Error("the promotion (stable revision web-1 to web-2) did not pass the predicate")
	}
}

// The current revision follows the update revision only once the governing
// Rollout made it stable, so that an abort with every Pod updated (a failed
// post-promotion analysis) still has a revision to take the Pods back to.
func TestPromotedHoldsTheCurrentRevisionUntilTheRolloutMadeItStable(t *testing.T) {
	cs := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	governing := func(stable string) []stepwisev1.Rollout {
		return []stepwisev1.Rollout{{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: stepwisev1.RolloutSpec{WorkloadRef: stepwisev1.WorkloadReference{
				APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"}},
			Status: stepwisev1.RolloutStatus{StableRevision: stable},
		}}
	}
	for _, tt := range []struct {
		name     string
		rollouts []stepwisev1.Rollout
		known    bool
		want     bool
	}{
		{name: "no Rollout", known: true, want: true},
		{name: "a Rollout that made it stable", rollouts: governing("web-2"), known: true, want: true},
		{name: "a Rollout still releasing it", rollouts: governing("web-1"), known: true, want: false},
		{name: "a Rollout without a stable revision yet", rollouts: governing(""), known: true, want: true},
		{name: "Rollouts not read", rollouts: governing("web-2"), known: false, want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := governanceOf(cs, tt.rollouts)
			g.known = tt.known
			if got := g.promoted("web-2"); got != tt.want {
				t.Errorf("promoted(web-2) = %v, want %v", got, tt.want)
			}
		})
	}
}
