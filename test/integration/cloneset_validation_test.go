package integration

import (
	"context"
	"strings"
	"testing"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The CRD refuses bad specs with a message that names the field, before any
// controller sees them.
func TestCloneSetValidationNamesTheField(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name   string
		mutate func(*stepwisev1.CloneSet)
		want   string
	}{
		{"partition above 100%", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Partition = intOrStr("150%") }, "spec.updateStrategy.partition"},
		{"partition negative", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Partition = intOrStr("-1") }, "spec.updateStrategy.partition"},
		{"partition not a percent", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Partition = intOrStr("half") }, "spec.updateStrategy.partition"},
		{"maxUnavailable bad", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.MaxUnavailable = intOrStr("20 %") }, "spec.updateStrategy.maxUnavailable"},
		{"maxSurge negative", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.MaxSurge = intOrStr("-2") }, "spec.updateStrategy.maxSurge"},
		{"scale maxUnavailable bad", func(cs *stepwisev1.CloneSet) { cs.Spec.ScaleStrategy.MaxUnavailable = intOrStr("101%") }, "spec.scaleStrategy.maxUnavailable"},
		{"maxSurge with InPlaceOnly", func(cs *stepwisev1.CloneSet) {
			cs.Spec.UpdateStrategy.Type = stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType
			cs.Spec.UpdateStrategy.MaxSurge = intOrStr("1")
		}, "spec.updateStrategy.maxSurge must be 0 when spec.updateStrategy.type is InPlaceOnly"},
		{"unknown strategy type", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Type = "Rolling" }, "spec.updateStrategy.type"},
		{"negative replicas", func(cs *stepwisev1.CloneSet) { n := int32(-1); cs.Spec.Replicas = &n }, "spec.replicas"},
		{"both priority strategies", func(cs *stepwisev1.CloneSet) {
			cs.Spec.UpdateStrategy.PriorityStrategy = &stepwisev1.UpdatePriorityStrategy{
				WeightPriority: []stepwisev1.UpdatePriorityWeightTerm{{Weight: 10}},
				OrderPriority:  []stepwisev1.UpdatePriorityOrderTerm{{OrderedKey: "k"}},
			}
		}, "spec.updateStrategy.priorityStrategy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCloneSet(ns, "invalid", 1)
			tc.mutate(cs)
			err := env.client.Create(context.Background(), cs)
			if err == nil {
				_ = env.client.Delete(context.Background(), cs)
				t.Fatalf("expected the API server to refuse the CloneSet")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not name %q:\n%v", tc.want, err)
			}
		})
	}

	t.Run("valid percent and int forms are accepted", func(t *testing.T) {
		cs := newCloneSet(ns, "valid", 1)
		cs.Spec.UpdateStrategy.Partition = intOrStr("100%")
		cs.Spec.UpdateStrategy.MaxUnavailable = intOrStr("2")
		cs.Spec.UpdateStrategy.MaxSurge = intOrStr("0%")
		cs.Spec.UpdateStrategy.Type = stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType
		if err := env.client.Create(context.Background(), cs); err != nil {
			t.Fatalf("valid CloneSet refused: %v", err)
		}
	})
}
