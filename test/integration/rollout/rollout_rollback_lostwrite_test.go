package rollout_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// An abort's rollback deletes a canary Pod only once a status write that
// says so has landed: the status that first names a deletion is lost here
// (refused before it reaches the API server), and no Pod is deleted in
// that round; every deletion the controller makes follows a written
// CanaryRollback condition that names the Pod, and the rollback still
// completes.
func TestALostRollbackStatusWriteDeletesNoPod(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	labels := map[string]string{"app": "db"}
	pilotedStatefulSet(t, ns, "db", 4, "1.0.0")

	var mu sync.Mutex
	lost := ""         // the CanaryRollback message whose write was lost
	written := ""      // the last CanaryRollback message written
	var early []string // Pods deleted with no written message naming them
	var deleted []string
	rollbackMessage := func(obj client.Object) string {
		ro, ok := obj.(*stepwisev1.Rollout)
		if !ok {
			return ""
		}
		if c := condition(ro, stepwisev1.CanaryRollbackCondition); c != nil {
			return c.Message
		}
		return ""
	}
	startController(t, ns, func(o *managerSetup) {
		o.hooks.WrapRolloutClient = func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					msg := rollbackMessage(obj)
					mu.Lock()
					if sub == "status" && lost == "" && strings.Contains(msg, " deleted") {
						lost = msg
						mu.Unlock()
						return apierrors.NewServiceUnavailable("status write lost on purpose")
					}
					mu.Unlock()
					if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
						return err
					}
					if sub == "status" {
						mu.Lock()
						written = msg
						mu.Unlock()
					}
					return nil
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if _, ok := obj.(*corev1.Pod); ok {
						mu.Lock()
						deleted = append(deleted, obj.GetName())
						if !strings.Contains(written, obj.GetName()+" deleted") {
							early = append(early, obj.GetName()+" (last written: "+written+")")
						}
						mu.Unlock()
					}
					return c.Delete(ctx, obj, opts...)
				},
			})
		}
	})
	canariesAwaitingPromotion(t, ns)

	annotate(t, ns, "db", stepwisev1.AbortAtAnnotation)
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, stepwisev1.CanaryRollbackCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonCanaryPodsRolledBack))
	})
	waitPods(t, ns, labels, 4, "db-1-0-0")

	mu.Lock()
	defer mu.Unlock()
	if lost == "" {
		t.Fatal("no status write naming a deletion was made, so none was lost: the test tested nothing")
	}
	if len(early) > 0 {
		t.Errorf("Pods deleted before a written status named them: %v (the lost write said %q)", early, lost)
	}
	if len(deleted) != 2 {
		t.Errorf("Pod deletions %v, want db-3 then db-2, once each", deleted)
	}
}
