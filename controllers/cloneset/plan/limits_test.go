package plan

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPartitionCount(t *testing.T) {
	cases := []struct {
		name      string
		replicas  int32
		partition *intstr.IntOrString
		want      int32
	}{
		{"unset_is_0", 5, nil, 0},
		{"int_as_is", 5, n(3), 3},
		{"int_above_replicas_is_clamped", 5, n(9), 5},
		{"negative_int_is_0", 5, n(-2), 0},
		{"percent_rounds_up", 5, pct("50%"), 3},
		{"percent_99_of_5_is_4", 5, pct("99%"), 4},
		{"percent_90_of_5_would_be_5_so_4", 5, pct("90%"), 4},
		{"percent_100_keeps_all", 5, pct("100%"), 5},
		{"percent_0_is_0", 5, pct("0%"), 0},
		{"percent_of_one_replica_keeps_it", 1, pct("50%"), 1},
		{"percent_of_zero_replicas_is_0", 0, pct("50%"), 0},
		{"invalid_keeps_every_pod", 5, pct("half"), 5},
		{"negative_replicas_is_0", -3, n(2), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PartitionCount(tc.replicas, tc.partition); got != tc.want {
				t.Errorf("PartitionCount(%d, %v) = %d, want %d", tc.replicas, tc.partition, got, tc.want)
			}
		})
	}
}

func TestResolveLimits(t *testing.T) {
	cases := []struct {
		name                string
		in                  Input
		maxUnavailable      int
		maxSurge            int
		scaleMaxUnavailable int
		scaleLimited        bool
	}{
		{name: "defaults_20_percent_rounds_down", in: Input{Replicas: 10}, maxUnavailable: 2},
		{name: "percent_rounding_to_0_is_1_without_surge", in: Input{Replicas: 4}, maxUnavailable: 1},
		{name: "percent_rounding_to_0_stays_0_with_surge", in: Input{Replicas: 4, MaxSurge: n(1)}, maxUnavailable: 0, maxSurge: 1},
		{name: "int_0_without_surge_is_1", in: Input{Replicas: 4, MaxUnavailable: n(0)}, maxUnavailable: 1},
		{name: "maxUnavailable_percent_rounds_down", in: Input{Replicas: 10, MaxUnavailable: pct("25%")}, maxUnavailable: 2},
		{name: "maxSurge_percent_rounds_up", in: Input{Replicas: 10, MaxSurge: pct("25%")}, maxUnavailable: 2, maxSurge: 3},
		{name: "paused_forces_surge_to_0", in: Input{Replicas: 10, MaxSurge: n(3), MaxUnavailable: n(0), Paused: true}, maxUnavailable: 1},
		{name: "invalid_surge_is_0", in: Input{Replicas: 10, MaxSurge: pct("lots")}, maxUnavailable: 2},
		{name: "scale_limit_percent_rounds_up", in: Input{Replicas: 10, ScaleMaxUnavailable: pct("15%")}, maxUnavailable: 2, scaleMaxUnavailable: 2, scaleLimited: true},
		{name: "scale_limit_0_is_1", in: Input{Replicas: 10, ScaleMaxUnavailable: n(0)}, maxUnavailable: 2, scaleMaxUnavailable: 1, scaleLimited: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := resolveLimits(tc.in)
			if l.maxUnavailable != tc.maxUnavailable || l.maxSurge != tc.maxSurge ||
				l.scaleMaxUnavailable != tc.scaleMaxUnavailable || l.scaleLimited != tc.scaleLimited {
				t.Errorf("got %+v, want maxUnavailable %d maxSurge %d scale %d/%v",
					l, tc.maxUnavailable, tc.maxSurge, tc.scaleMaxUnavailable, tc.scaleLimited)
			}
		})
	}
}
