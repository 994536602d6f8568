package plan

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func weights(terms ...any) *v1alpha1.UpdatePriorityStrategy {
	s := &v1alpha1.UpdatePriorityStrategy{}
	for i := 0; i+2 < len(terms); i += 3 {
		s.WeightPriority = append(s.WeightPriority, v1alpha1.UpdatePriorityWeightTerm{
			Weight:        int32(terms[i].(int)),
			MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{terms[i+1].(string): terms[i+2].(string)}},
		})
	}
	return s
}

func orderKeys(keys ...string) *v1alpha1.UpdatePriorityStrategy {
	s := &v1alpha1.UpdatePriorityStrategy{}
	for _, k := range keys {
		s.OrderPriority = append(s.OrderPriority, v1alpha1.UpdatePriorityOrderTerm{OrderedKey: k})
	}
	return s
}

func scatterBy(kv ...string) v1alpha1.UpdateScatterStrategy {
	var s v1alpha1.UpdateScatterStrategy
	for i := 0; i+1 < len(kv); i += 2 {
		s = append(s, v1alpha1.UpdateScatterTerm{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

func withPriority(p *v1alpha1.UpdatePriorityStrategy) inOpt {
	return func(in *Input) { in.PriorityStrategy = p }
}

func withScatter(s v1alpha1.UpdateScatterStrategy) inOpt {
	return func(in *Input) { in.ScatterStrategy = s }
}

// everyone lets every Pod update this round, to see the whole order.
var everyone = maxUnavailable(pct("100%"))

func orderCases() []calcCase {
	zoned := func() []Pod {
		return []Pod{
			pod("p-0", revOld, label("zone", "a")),
			pod("p-1", revOld, label("zone", "b")),
			pod("p-2", revOld, label("zone", "c")),
			pod("p-3", revOld, label("zone", "b")),
		}
	}
	ranked := func() []Pod {
		return []Pod{
			pod("p-0", revOld, label("rank", "3")),
			pod("p-1", revOld, label("rank", "rack-1")),
			pod("p-2", revOld, label("tier", "0")),
			pod("p-3", revOld, label("rank", "2")),
			pod("p-4", revOld),
			pod("p-5", revOld, label("rank", "none", "tier", "1")),
		}
	}
	return []calcCase{
		{
			name: "default_order_is_by_name",
			in:   input(4, zoned(), everyone),
			want: Plan{ExpectedUpdatedReplicas: 4, Update: names("p-0", "p-1", "p-2", "p-3")},
		},
		{
			name: "weight_priority_heavier_first_weights_add_up",
			in: input(4, set(zoned(), names("p-3"), label("canary", "yes")), everyone,
				withPriority(weights(10, "zone", "b", 50, "zone", "c", 45, "canary", "yes"))),
			want: Plan{ExpectedUpdatedReplicas: 4, Update: names("p-3", "p-2", "p-1", "p-0")},
		},
		{
			name: "weight_priority_limited_by_budget_takes_the_heaviest",
			in: input(4, zoned(), maxUnavailable(n(1)),
				withPriority(weights(10, "zone", "c"))),
			want: Plan{ExpectedUpdatedReplicas: 4, Update: names("p-2")},
		},
		{
			name: "order_priority_largest_first_earlier_keys_win_like_kruise",
			in:   input(6, ranked(), everyone, withPriority(orderKeys("rank", "tier"))),
			want: Plan{ExpectedUpdatedReplicas: 6, Update: names("p-0", "p-3", "p-1", "p-5", "p-2", "p-4")},
		},
		{
			name: "not_ready_pods_come_before_priority",
			in: input(4, set(zoned(), names("p-0"), notReady), maxUnavailable(n(2)),
				withPriority(weights(10, "zone", "b"))),
			want: Plan{ExpectedUpdatedReplicas: 4, Update: names("p-0", "p-1")},
		},
		{
			name: "scatter_spreads_matching_pods_across_the_order",
			in: input(6, []Pod{
				pod("p-0", revOld, label("zone", "a")), pod("p-1", revOld, label("zone", "a")),
				pod("p-2", revOld, label("zone", "b")), pod("p-3", revOld, label("zone", "b")),
				pod("p-4", revOld, label("zone", "b")), pod("p-5", revOld, label("zone", "b")),
			}, everyone, withScatter(scatterBy("zone", "a"))),
			want: Plan{ExpectedUpdatedReplicas: 6, Update: names("p-2", "p-0", "p-3", "p-4", "p-1", "p-5")},
		},
		{
			name: "scatter_never_overrides_priority",
			in: input(4, zoned(), everyone,
				withPriority(weights(10, "zone", "b")), withScatter(scatterBy("zone", "b"))),
			want: Plan{ExpectedUpdatedReplicas: 4, Update: names("p-1", "p-3", "p-0", "p-2")},
		},
		{
			name: "rollback_reverses_priority_so_first_updated_go_back_last",
			in: input(4, []Pod{
				pod("p-0", revNew, label("zone", "a")), pod("p-1", revNew, label("zone", "b")),
				pod("p-2", revNew, label("zone", "c")), pod("p-3", revNew, label("zone", "b")),
			}, partition(n(2)), everyone, withPriority(weights(10, "zone", "b"))),
			want: Plan{ExpectedUpdatedReplicas: 2, Rollback: names("p-2", "p-0")},
		},
		{
			name: "invalid_selector_term_matches_nothing",
			in: input(2, pods("p", revOld, 2), everyone, withPriority(&v1alpha1.UpdatePriorityStrategy{
				WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{{Weight: 90, MatchSelector: metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Bogus"}},
				}}},
			})),
			want: Plan{ExpectedUpdatedReplicas: 2, Update: names("p-0", "p-1")},
		},
	}
}

func TestSpread(t *testing.T) {
	// m matching Pods (M) among n: the k-th goes to the middle of the k-th
	// of m equal slices, and everything else keeps its order.
	cases := []struct {
		name    string
		pattern string
		want    string
	}{
		{"one_of_five_goes_to_the_middle", "M....", "..M.."},
		{"two_of_six", "MM....", ".M..M."},
		{"three_of_six_alternate", "MMM...", ".M.M.M"},
		{"four_of_six", "MMMM..", "M.MM.M"},
		{"none_or_all_untouched", "......", "......"},
		{"all_match_untouched", "MMM", "MMM"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seq []*podState
			for i, c := range tc.pattern {
				p := pod(fmt.Sprint(i), revOld)
				if c == 'M' {
					p.Labels = map[string]string{"k": "v"}
				}
				seq = append(seq, &podState{pod: &p})
			}
			out := spread(seq, v1alpha1.UpdateScatterTerm{Key: "k", Value: "v"})
			got := make([]byte, len(out))
			var matched, others []string
			for i, s := range out {
				got[i] = '.'
				if s.pod.Labels["k"] == "v" {
					got[i] = 'M'
					matched = append(matched, s.pod.Name)
				} else {
					others = append(others, s.pod.Name)
				}
			}
			if string(got) != tc.want {
				t.Errorf("spread(%s) = %s, want %s", tc.pattern, got, tc.want)
			}
			if !slices.IsSorted(matched) || !slices.IsSorted(others) {
				t.Errorf("relative order lost: %v %v", matched, others)
			}
		})
	}
}

func TestOrderValue(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"7", 7, true},
		{"-2", -2, true},
		{"rack-3", 3, true},
		{"v10", 10, true},
		{"none", 0, false},
		{"", 0, false},
		{"99999999999999999999", 0, false},
	}
	for _, tc := range cases {
		got, ok := orderValue(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("orderValue(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
