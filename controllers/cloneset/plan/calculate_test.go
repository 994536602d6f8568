package plan

import (
	"slices"
	"testing"
)

type calcCase struct {
	name string
	in   Input
	want Plan
}

func runCases(t *testing.T, cases []calcCase) {
	t.Helper()
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("two cases named %s", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			got := Calculate(tc.in)
			checkPlan(t, tc.in, got)
			if d := diffPlan(got, tc.want); d != "" {
				t.Errorf("plan differs:%s", d)
			}
		})
	}
}

func del(reason string, names ...string) []Deletion {
	var out []Deletion
	for _, name := range names {
		out = append(out, Deletion{Name: name, Reason: reason})
	}
	return out
}

func names(ns ...string) []string { return ns }

// TestCalculate runs every table, one subtest per behaviour:
// go test -run 'TestCalculate/rollback_when_partition_raised'.
func TestCalculate(t *testing.T) {
	runCases(t, slices.Concat(basicCases(), rollbackCases(), surgeCases(), scaleCases(),
		specifiedDeleteCases(), pausedCases(), blockedCases(), orderCases(), heldCases()))
}

func basicCases() []calcCase {
	return []calcCase{
		{
			name: "steady_state_plans_nothing",
			in:   input(5, pods("a", revNew, 5), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 5},
		},
		{
			name: "update_takes_one_pod_with_maxUnavailable_1",
			in:   input(5, pods("a", revOld, 5), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5, Update: names("a-0")},
		},
		{
			name: "default_maxUnavailable_is_20_percent",
			in:   input(10, pods("a", revOld, 10)),
			want: Plan{ExpectedUpdatedReplicas: 10, Update: names("a-0", "a-1")},
		},
		{
			name: "maxUnavailable_percent_rounding_to_0_allows_one",
			in:   input(4, pods("a", revOld, 4)),
			want: Plan{ExpectedUpdatedReplicas: 4, Update: names("a-0")},
		},
		{
			name: "maxUnavailable_0_without_surge_allows_one",
			in:   input(4, pods("a", revOld, 4), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 4, Update: names("a-0")},
		},
		{
			name: "partition_3_of_5_updates_at_most_2",
			in:   input(5, pods("a", revOld, 5), partition(n(3)), maxUnavailable(n(5))),
			want: Plan{ExpectedUpdatedReplicas: 2, Update: names("a-0", "a-1")},
		},
		{
			name: "partition_3_of_5_with_maxUnavailable_1_updates_one_at_a_time",
			in:   input(5, pods("a", revOld, 5), partition(n(3)), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 2, Update: names("a-0")},
		},
		{
			name: "partition_3_of_5_stops_at_2_updated",
			in:   input(5, join(pods("a", revOld, 3), pods("b", revNew, 2)), partition(n(3)), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 2},
		},
		{
			name: "partition_99_percent_of_5_keeps_4",
			in:   input(5, pods("a", revOld, 5), partition(pct("99%")), maxUnavailable(n(5))),
			want: Plan{ExpectedUpdatedReplicas: 1, Update: names("a-0")},
		},
		{
			name: "partition_100_percent_keeps_every_pod",
			in:   input(5, pods("a", revOld, 5), partition(pct("100%"))),
			want: Plan{ExpectedUpdatedReplicas: 0},
		},
		{
			name: "partition_above_replicas_is_clamped",
			in:   input(5, pods("a", revOld, 5), partition(n(7))),
			want: Plan{ExpectedUpdatedReplicas: 0},
		},
		{
			name: "update_waits_while_own_update_is_in_flight",
			in: input(5, join(pods("a", revOld, 4), []Pod{pod("b-0", revNew, updating)}),
				maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5},
		},
		{
			name: "not_ready_old_pod_updates_first_for_free",
			in:   input(5, set(pods("a", revOld, 5), names("a-3"), notReady), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5, Update: names("a-3")},
		},
		{
			name: "not_ready_old_pod_first_then_budget",
			in:   input(5, set(pods("a", revOld, 5), names("a-3"), notReady), maxUnavailable(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 5, Update: names("a-3", "a-0")},
		},
		{
			name: "pod_waiting_out_minReadySeconds_uses_budget_without_blocking",
			in: input(5, join(pods("a", revOld, 4), []Pod{pod("b-0", revNew, warming)}),
				maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5},
		},
		{
			name: "terminating_pod_uses_budget_and_is_replaced_not_deleted_again",
			in: input(5, join(pods("a", revOld, 4), []Pod{pod("a-9", revOld, terminate)}),
				maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5, CreateUpdateRevision: 1},
		},
		{
			name: "empty_current_revision_means_update_revision",
			in:   input(3, nil, revisions("", revNew), partition(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 2, CreateUpdateRevision: 3},
		},
	}
}

func rollbackCases() []calcCase {
	oneOldFourNew := func() []Pod { return join(pods("a", revOld, 1), pods("b", revNew, 4)) }
	return []calcCase{
		{
			name: "rollback_when_partition_raised",
			in:   input(5, oneOldFourNew(), partition(n(4)), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 1, Rollback: names("b-3")},
		},
		{
			name: "rollback_candidates_limited_by_budget",
			in:   input(5, oneOldFourNew(), partition(n(4)), maxUnavailable(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 1, Rollback: names("b-3", "b-2")},
		},
		{
			name: "rollback_takes_at_most_the_3_candidates",
			in:   input(5, oneOldFourNew(), partition(n(4)), maxUnavailable(n(5))),
			want: Plan{ExpectedUpdatedReplicas: 1, Rollback: names("b-3", "b-2", "b-1")},
		},
		{
			name: "rollback_takes_not_ready_pod_first",
			in:   input(5, set(oneOldFourNew(), names("b-1"), notReady), partition(n(4)), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 1, Rollback: names("b-1")},
		},
		{
			name: "rollback_to_partition_100_percent_aborts",
			in:   input(5, oneOldFourNew(), partition(pct("100%")), maxUnavailable(n(5))),
			want: Plan{ExpectedUpdatedReplicas: 0, Rollback: names("b-3", "b-2", "b-1", "b-0")},
		},
		{
			name: "no_rollback_when_revisions_are_equal",
			in:   input(5, oneOldFourNew(), revisions(revNew, revNew), partition(n(4))),
			want: Plan{ExpectedUpdatedReplicas: 1},
		},
		{
			name: "rollback_takes_a_pod_stuck_mid_update_at_no_cost",
			in: input(5, set(oneOldFourNew(), names("b-3"), updating), partition(n(4)),
				maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 1, Rollback: names("b-3")},
		},
		{
			name: "third_revision_pods_move_forward_before_partition_pods",
			in:   input(4, join(pods("a", revOld, 2), pods("z", revStale, 2)), partition(n(2)), maxUnavailable(n(4))),
			want: Plan{ExpectedUpdatedReplicas: 2, Update: names("z-0", "z-1")},
		},
		{
			name: "third_revision_pods_roll_back_when_partition_wants_them",
			in:   input(4, join(pods("a", revOld, 2), pods("z", revStale, 2)), partition(n(4)), maxUnavailable(n(4))),
			want: Plan{ExpectedUpdatedReplicas: 0, Rollback: names("z-1", "z-0")},
		},
		{
			name: "third_revision_pods_split_between_forward_and_back",
			in: input(4, join(pods("a", revOld, 1), pods("b", revNew, 1), pods("z", revStale, 2)),
				partition(n(2)), maxUnavailable(n(4))),
			want: Plan{ExpectedUpdatedReplicas: 2, Update: names("z-0"), Rollback: names("z-1")},
		},
		{
			name: "third_revision_counts_as_old_when_revisions_are_equal",
			in:   input(4, join(pods("b", revNew, 2), pods("z", revStale, 2)), revisions(revNew, revNew), partition(n(1)), maxUnavailable(n(4))),
			want: Plan{ExpectedUpdatedReplicas: 3, Update: names("z-0")},
		},
	}
}

func surgeCases() []calcCase {
	return []calcCase{
		{
			name: "surge_creates_new_pods_before_touching_old_ones",
			in:   input(5, pods("a", revOld, 5), maxSurge(n(2)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 5, CreateUpdateRevision: 2},
		},
		{
			name: "surge_never_exceeds_the_moves_wanted",
			in:   input(5, pods("a", revOld, 5), partition(n(4)), maxSurge(n(3)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 1, CreateUpdateRevision: 1},
		},
		{
			name: "surge_percent_rounds_up",
			in:   input(5, pods("a", revOld, 5), maxSurge(pct("10%")), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 5, CreateUpdateRevision: 1},
		},
		{
			name: "surge_pods_count_toward_availability",
			in:   input(5, join(pods("a", revOld, 5), pods("s", revNew, 2)), maxSurge(n(2)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 5, Update: names("a-0", "a-1")},
		},
		{
			name: "not_ready_surge_pods_add_no_budget",
			in: input(5, join(pods("a", revOld, 5), set(pods("s", revNew, 2), names("s-0", "s-1"), notReady)),
				maxSurge(n(2)), maxUnavailable(n(0))),
			// A snapshot: the planner cannot tell starting Pods from broken
			// ones, so the reconciler waits before warning.
			want: Plan{ExpectedUpdatedReplicas: 5, Blocked: &Blocked{MaxUnavailable: 0, Pods: names("s-0", "s-1")}},
		},
		{
			name: "surge_surplus_deleted_from_old_revision_once_update_is_done",
			in:   input(5, join(pods("a", revOld, 2), pods("b", revNew, 5)), maxSurge(n(2)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 5, Delete: del(ReasonSurgeCleanup, "a-1", "a-0")},
		},
		{
			name: "surge_shrinks_as_moves_get_done",
			in:   input(5, join(pods("a", revOld, 3), pods("b", revNew, 4)), maxSurge(n(2)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 5, Delete: del(ReasonSurgeCleanup, "a-2"), Update: names("a-0")},
		},
		{
			name: "surge_cleanup_waits_for_budget",
			in: input(5, join(pods("a", revOld, 2), set(pods("b", revNew, 5), names("b-0", "b-1", "b-2"), updating)),
				maxSurge(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 5},
		},
		{
			name: "surge_cleanup_keeps_partition_pods",
			in: input(5, join(pods("a", revOld, 3), pods("b", revNew, 3)), partition(n(2)),
				maxSurge(n(1)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 3, Delete: del(ReasonSurgeCleanup, "a-2")},
		},
		{
			name: "paused_deletes_surge_pods_surplus",
			in:   input(5, join(pods("a", revOld, 5), pods("s", revNew, 2)), maxSurge(n(2)), paused),
			want: Plan{ExpectedUpdatedReplicas: 5, Delete: del(ReasonSurgeCleanup, "a-4", "a-3")},
		},
		{
			name: "rollback_surges_on_current_revision",
			in:   input(5, pods("b", revNew, 5), partition(pct("100%")), maxSurge(n(1)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 0, CreateCurrentRevision: 1},
		},
		{
			name: "surge_pod_lets_rollback_start_with_maxUnavailable_0",
			in: input(5, join(pods("a", revOld, 1), pods("b", revNew, 5)), partition(pct("100%")),
				maxSurge(n(1)), maxUnavailable(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 0, Rollback: names("b-4")},
		},
	}
}

func scaleCases() []calcCase {
	return []calcCase{
		{
			name: "scale_up_creates_on_update_revision",
			in:   input(5, pods("b", revNew, 3), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 5, CreateUpdateRevision: 2},
		},
		{
			name: "scale_up_fills_partition_on_current_revision",
			in:   input(5, join(pods("a", revOld, 1), pods("b", revNew, 2)), partition(n(3))),
			want: Plan{ExpectedUpdatedReplicas: 2, CreateCurrentRevision: 2},
		},
		{
			name: "scale_up_splits_between_revisions",
			in:   input(6, join(pods("a", revOld, 1), pods("b", revNew, 1)), partition(n(3))),
			want: Plan{ExpectedUpdatedReplicas: 3, CreateCurrentRevision: 2, CreateUpdateRevision: 2},
		},
		{
			name: "scale_up_limited_by_not_ready_pods",
			in: input(10, set(pods("b", revNew, 5), names("b-4"), notReady), revisions(revNew, revNew),
				scaleLimit(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 10, CreateUpdateRevision: 1},
		},
		{
			name: "scale_up_stops_while_not_ready_pods_reach_the_limit",
			in: input(10, set(pods("b", revNew, 5), names("b-3", "b-4"), notReady), revisions(revNew, revNew),
				scaleLimit(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 10},
		},
		{
			name: "scale_up_limit_percent_rounds_up",
			in:   input(10, pods("b", revNew, 5), revisions(revNew, revNew), scaleLimit(pct("15%"))),
			want: Plan{ExpectedUpdatedReplicas: 10, CreateUpdateRevision: 2},
		},
		{
			name: "scale_up_limit_0_means_one_at_a_time",
			in:   input(10, pods("b", revNew, 5), revisions(revNew, revNew), scaleLimit(n(0))),
			want: Plan{ExpectedUpdatedReplicas: 10, CreateUpdateRevision: 1},
		},
		{
			name: "scale_down_deletes_not_ready_first_then_youngest",
			in:   input(3, set(pods("b", revNew, 5), names("b-1"), notReady), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 3, Delete: del(ReasonScaleDown, "b-1", "b-4")},
		},
		{
			name: "scale_down_deletes_unscheduled_before_not_ready",
			in: input(3, set(set(pods("b", revNew, 5), names("b-1"), notReady), names("b-0"), unscheduled),
				revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 3, Delete: del(ReasonScaleDown, "b-0", "b-1")},
		},
		{
			name: "scale_down_keeps_partition_pods",
			in: input(4, join(set(pods("a", revOld, 2), names("a-0"), notReady), pods("b", revNew, 3)),
				partition(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 2, Delete: del(ReasonScaleDown, "b-2")},
		},
		{
			name: "scale_down_during_update_takes_old_pods",
			in:   input(3, join(pods("a", revOld, 3), set(pods("b", revNew, 2), names("b-1"), notReady)), maxUnavailable(n(5))),
			want: Plan{ExpectedUpdatedReplicas: 3, Delete: del(ReasonScaleDown, "a-2", "a-1"), Update: names("a-0")},
		},
		{
			name: "scale_down_takes_third_revision_first",
			in:   input(2, join(pods("b", revNew, 2), pods("z", revStale, 1)), revisions(revOld, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 2, Delete: del(ReasonScaleDown, "z-0")},
		},
		{
			name: "scale_down_waits_for_budget",
			in: input(4, join(pods("a", revOld, 1), set(pods("b", revNew, 4), names("b-0", "b-1"), updating)),
				maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 4},
		},
		{
			name: "scale_to_zero_deletes_everything",
			in:   input(0, pods("b", revNew, 3), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 0, Delete: del(ReasonScaleDown, "b-2", "b-1", "b-0")},
		},
		{
			name: "negative_replicas_read_as_zero",
			in:   input(-1, pods("b", revNew, 1), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 0, Delete: del(ReasonScaleDown, "b-0")},
		},
	}
}

func specifiedDeleteCases() []calcCase {
	return []calcCase{
		{
			name: "specified_delete_gets_replaced",
			in:   input(5, set(pods("b", revNew, 5), names("b-2"), toDelete), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 5, Delete: del(ReasonSpecifiedDelete, "b-2"), CreateUpdateRevision: 1},
		},
		{
			name: "specified_delete_with_lower_replicas_is_not_replaced",
			in:   input(4, set(pods("b", revNew, 5), names("b-2"), toDelete), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 4, Delete: del(ReasonSpecifiedDelete, "b-2")},
		},
		{
			name: "specified_delete_waits_for_budget_while_replacement_is_created",
			in: input(5, set(set(pods("b", revNew, 5), names("b-2"), toDelete), names("b-4"), notReady),
				revisions(revNew, revNew), maxUnavailable(n(1))),
			want: Plan{ExpectedUpdatedReplicas: 5, CreateUpdateRevision: 1},
		},
		{
			name: "specified_delete_of_partition_pod_is_replaced_on_current_revision",
			in: input(5, join(set(pods("a", revOld, 2), names("a-1"), toDelete), pods("b", revNew, 3)),
				partition(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 3, Delete: del(ReasonSpecifiedDelete, "a-1"), CreateCurrentRevision: 1},
		},
		{
			name: "specified_delete_is_not_updated",
			in:   input(2, set(pods("a", revOld, 2), names("a-0"), toDelete), maxUnavailable(n(2))),
			want: Plan{ExpectedUpdatedReplicas: 2, Delete: del(ReasonSpecifiedDelete, "a-0"), CreateUpdateRevision: 1, Update: names("a-1")},
		},
		{
			name: "specified_delete_of_terminating_pod_is_not_repeated",
			in:   input(2, set(pods("b", revNew, 2), names("b-0"), toDelete, terminate), revisions(revNew, revNew)),
			want: Plan{ExpectedUpdatedReplicas: 2, CreateUpdateRevision: 1},
		},
	}
}
