package plan

import (
	"testing"
)

func pausedCases() []calcCase {
	return []calcCase{
		{
			name: "paused_plans_no_update",
			in:   input(5, pods("a", revOld, 5), paused),
			want: Plan{ExpectedUpdatedReplicas: 5},
		},
		{
			name: "paused_plans_no_rollback",
			in:   input(5, join(pods("a", revOld, 1), pods("b", revNew, 4)), partition(n(4)), paused),
			want: Plan{ExpectedUpdatedReplicas: 1},
		},
		{
			name: "paused_still_scales_up",
			in:   input(7, pods("a", revOld, 5), paused),
			want: Plan{ExpectedUpdatedReplicas: 7, CreateUpdateRevision: 2},
		},
		{
			name: "paused_still_scales_up_within_partition",
			in:   input(7, pods("a", revOld, 5), partition(n(6)), paused),
			want: Plan{ExpectedUpdatedReplicas: 1, CreateCurrentRevision: 1, CreateUpdateRevision: 1},
		},
		{
			name: "paused_still_scales_down",
			in:   input(3, pods("a", revOld, 5), paused),
			want: Plan{ExpectedUpdatedReplicas: 3, Delete: del(ReasonScaleDown, "a-4", "a-3")},
		},
		{
			name: "paused_still_replaces_specified_delete",
			in:   input(5, set(pods("a", revOld, 5), names("a-0"), toDelete), partition(n(5)), paused),
			want: Plan{ExpectedUpdatedReplicas: 0, Delete: del(ReasonSpecifiedDelete, "a-0"), CreateCurrentRevision: 1},
		},
		{
			name: "paused_is_never_blocked",
			in:   input(5, set(pods("a", revOld, 5), names("a-0"), notReady), maxUnavailable(n(1)), paused),
			want: Plan{ExpectedUpdatedReplicas: 5},
		},
	}
}

func blockedCases() []calcCase {
	return []calcCase{
		{
			name: "budget_blocked_by_broken_probes_sets_blocked",
			in: input(5, join(pods("a", revOld, 4), set(pods("b", revNew, 1), names("b-0"), notReady)),
				maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5, Blocked: &Blocked{Unavailable: 1, MaxUnavailable: 1, Pods: names("b-0")}},
		},
		{
			name: "blocked_counts_missing_pods_but_names_only_broken_ones",
			in: input(5, join(pods("a", revOld, 3), set(pods("b", revNew, 1), names("b-0"), notReady), pods("t", revOld, 1)),
				maxUnavailable(n(2)), scaleLimit(n(1)), func(in *Input) { in.Pods[4].Terminating = true }),
			want: Plan{ExpectedUpdatedReplicas: 5, Blocked: &Blocked{Unavailable: 2, MaxUnavailable: 2, Pods: names("b-0")}},
		},
		{
			name: "not_blocked_while_own_update_is_in_flight",
			in: input(5, join(pods("a", revOld, 3), set(pods("b", revNew, 2), names("b-0"), notReady), nil),
				maxUnavailable(n(2)), func(in *Input) { updating(&in.Pods[4]) }),
			want: Plan{ExpectedUpdatedReplicas: 5},
		},
		{
			name: "broken_old_pod_is_updated_not_blocked",
			in:   input(5, set(pods("a", revOld, 5), names("a-2"), notReady), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5, Update: names("a-2")},
		},
		{
			name: "broken_pod_within_partition_does_not_block_a_finished_update",
			in: input(5, join(set(pods("a", revOld, 3), names("a-0"), notReady), pods("b", revNew, 2)),
				partition(n(3)), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 2},
		},
		{
			name: "blocked_rollback_is_reported_too",
			in: input(5, join(set(pods("a", revOld, 1), names("a-0"), notReady), pods("b", revNew, 4)),
				partition(n(4)), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 1, Blocked: &Blocked{Unavailable: 1, MaxUnavailable: 1, Pods: names("a-0")}},
		},
	}
}

func TestBlockedMessage(t *testing.T) {
	ps := set(pods("b", revNew, 10), names("b-0", "b-1", "b-2", "b-3", "b-4", "b-5", "b-6"), notReady)
	in := input(12, join(ps, pods("a", revOld, 2)), maxUnavailable(n(3)), scaleLimit(n(1)))
	p := Calculate(in)
	if p.Blocked == nil {
		t.Fatalf("want Blocked, got %+v", p)
	}
	want := "update cannot progress: 7 of 12 replicas are unavailable and maxUnavailable is 3, " +
		"so no available Pod may be taken out of service; waiting for Pods that are not ready: b-0, b-1, b-2, b-3, b-4 and 2 more"
	if p.Blocked.Message != want {
		t.Errorf("message\n got %q\nwant %q", p.Blocked.Message, want)
	}
	if len(p.Blocked.Pods) != 7 {
		t.Errorf("Pods = %v, want all 7", p.Blocked.Pods)
	}
}

// heldCases: Pods an inPlaceUpdate hook took aside (PreparingUpdate) wait
// for their move, and are released when no move wants them any more.
func heldCases() []calcCase {
	return []calcCase{
		{
			name: "held_pod_is_moved_first_while_its_update_is_wanted",
			in:   input(3, set(pods("a", revOld, 3), names("a-1"), held)),
			want: Plan{ExpectedUpdatedReplicas: 3, Update: names("a-1")},
		},
		{
			name: "held_pod_released_when_the_template_goes_back_to_its_revision",
			in:   input(2, set(pods("a", revOld, 2), names("a-0", "a-1"), held), revisions(revOld, revOld)),
			want: Plan{ExpectedUpdatedReplicas: 2, Release: names("a-0", "a-1")},
		},
		{
			name: "held_pod_released_when_the_partition_keeps_it",
			in: input(3, join(pods("b", revNew, 1), set(pods("a", revOld, 2), names("a-0"), held)),
				partition(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 1, Release: names("a-0")},
		},
		{
			name: "held_pod_on_the_update_revision_kept_for_its_rollback",
			in: input(3, join(pods("a", revOld, 2), set(pods("b", revNew, 1), names("b-0"), held)),
				partition(n(3))),
			want: Plan{ExpectedUpdatedReplicas: 0, Rollback: names("b-0")},
		},
		{
			name: "held_pod_on_the_update_revision_released_when_the_rollback_is_called_off",
			in: input(3, join(pods("a", revOld, 2), set(pods("b", revNew, 1), names("b-0"), held)),
				partition(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 1, Release: names("b-0")},
		},
		{
			name: "held_pod_on_a_third_revision_is_never_released",
			in: input(2, join(pods("a", revOld, 1), set(pods("s", revStale, 1), names("s-0"), held)),
				partition(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 0, Rollback: names("s-0")},
		},
		{
			name: "paused_keeps_a_held_pod_whose_update_is_still_wanted",
			in:   input(3, set(pods("a", revOld, 3), names("a-1"), held), paused),
			want: Plan{ExpectedUpdatedReplicas: 3},
		},
		{
			name: "paused_still_releases_a_held_pod_nothing_wants_to_move",
			in:   input(2, set(pods("a", revOld, 2), names("a-1"), held), revisions(revOld, revOld), paused),
			want: Plan{ExpectedUpdatedReplicas: 2, Release: names("a-1")},
		},
		{
			name: "held_pod_picked_for_scale_down_is_deleted_not_released",
			in:   input(1, set(pods("a", revOld, 2), names("a-1"), held), revisions(revOld, revOld)),
			want: Plan{ExpectedUpdatedReplicas: 1, Delete: del(ReasonScaleDown, "a-1")},
		},
	}
}
