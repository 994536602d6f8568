package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/internal/manager"
)

// managers lists the field managers of an object's managedFields entries,
// by subresource ("" for the object itself).
func managers(obj metav1.Object) map[string][]string {
	out := map[string][]string{}
	for _, e := range obj.GetManagedFields() {
		out[e.Subresource] = append(out[e.Subresource], e.Manager)
	}
	return out
}

// TestManagerWritesAsItsFieldOwners: the shipped setup names the CloneSet
// controller's writes "stepwise-cloneset" in managedFields, whatever the
// binary is called, so what kubectl and GitOps tools show in tests is what
// they show in a cluster.
func TestManagerWritesAsItsFieldOwners(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 2)
	g.Expect(env.client.Create(context.Background(), cs)).To(Succeed())

	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns)
		g.Expect(pods).To(HaveLen(2))
		for i := range pods {
			// Created, then the readiness gate's condition patched.
			g.Expect(managers(&pods[i])).To(Equal(map[string][]string{
				"":       {manager.CloneSetFieldOwner},
				"status": {manager.CloneSetFieldOwner},
			}), "pod %s", pods[i].Name)
		}
		var revs appsv1.ControllerRevisionList
		g.Expect(env.client.List(context.Background(), &revs, client.InNamespace(ns))).To(Succeed())
		g.Expect(revs.Items).To(HaveLen(1))
		g.Expect(managers(&revs.Items[0])).To(Equal(map[string][]string{"": {manager.CloneSetFieldOwner}}))
		got := getCloneSet(g, ns, "web")
		g.Expect(managers(got)).To(HaveKeyWithValue("status", []string{manager.CloneSetFieldOwner}))
	}, timeout).Should(Succeed())
}
