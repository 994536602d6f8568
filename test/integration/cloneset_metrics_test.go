package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// seriesOf counts the series of the manager's CloneSet metrics that belong
// to one namespace.
func seriesOf(g Gomega, ns string) int {
	families, err := env.manager.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					n++
				}
			}
		}
	}
	return n
}

// TestCloneSetMetricsForgottenOnDelete: a deleted CloneSet's series leave
// the manager, so CloneSets that come and go do not grow its memory and
// every scrape.
func TestCloneSetMetricsForgottenOnDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 1)
	cs.Spec.UpdateStrategy = stepwisev1.CloneSetUpdateStrategy{Type: stepwisev1.RecreateCloneSetUpdateStrategyType, MaxUnavailable: intOrStr("100%")}
	g.Expect(env.client.Create(ctx, cs)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(listPods(g, ns)).To(HaveLen(1)) }, timeout).Should(Succeed())

	// A new image under ReCreate: the Pod is recreated and counted.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := &stepwisev1.CloneSet{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(cs), latest); err != nil {
			return err
		}
		latest.Spec.Template.Spec.Containers[0].Image = "example.com/app:v2"
		return env.client.Update(ctx, latest)
	})).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(seriesOf(g, ns)).To(BeNumerically(">", 0)) }, timeout).Should(Succeed())

	g.Expect(env.client.Delete(ctx, cs)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(seriesOf(g, ns)).To(BeZero()) }, timeout).Should(Succeed())
}
