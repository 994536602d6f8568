package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/internal/manager"
)

// TestCloneSetControllerWatchingNamespaces: with --namespaces the manager's
// Pod cache is an informer per namespace behind one without an indexer,
// and the CloneSet controller reads its Pods through a list by controller
// instead (setUpIndexes). It finds them: the CloneSet creates its replicas
// and no more, and reports them. (This package's own tests run no CloneSet
// controller, so the manager started here is the only one.)
func TestCloneSetControllerWatchingNamespaces(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	startController(t, ns, func(o *managerSetup) { o.Controllers = []string{manager.CloneSetController} })
	createCloneSet(t, newCloneSet(ns, "web", 3, "1.0.0"))

	ownedPods := func() int {
		var pods corev1.PodList
		g.Expect(env.client.List(testContext(t), &pods, client.InNamespace(ns))).To(Succeed())
		owned := 0
		for i := range pods.Items {
			if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil && ref.Kind == "CloneSet" && ref.Name == "web" {
				owned++
			}
		}
		return owned
	}
	g.Eventually(func() int32 { return getCloneSet(t, ns, "web").Status.Replicas }, 30*time.Second, 100*time.Millisecond).To(Equal(int32(3)))
	// A controller that did not find its Pods would create more.
	g.Consistently(ownedPods, 3*time.Second, 200*time.Millisecond).Should(Equal(3))
}
