package rollout_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
)

// autopilot plays the CloneSet controller until the test ends: the update
// revision follows the template (a ControllerRevision is stored for it),
// Pods outside the partition are updated and ready at once, and the current
// revision moves when every Pod is updated.
func autopilot(t *testing.T, ns, name string) {
	t.Helper()
	ctx := testContext(t)
	var mu sync.Mutex
	var lastErr error
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := autopilotOnce(ctx, ns, name); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if lastErr != nil {
			t.Logf("autopilot: last error: %v", lastErr)
		}
	})
}

func autopilotOnce(ctx context.Context, ns, name string) error {
	cs := &stepwisev1.CloneSet{}
	if err := env.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cs); err != nil {
		return err
	}
	rev := revisionOf(name, cs.Spec.Template.Spec)
	if err := storeRevision(ctx, cs, rev); err != nil {
		return err
	}
	replicas := *cs.Spec.Replicas
	st := cs.Status
	if st.CurrentRevision == "" {
		st.CurrentRevision = rev
	}
	st.UpdateRevision = rev
	// Governed as the CloneSet controller is: the Rollout naming it (the
	// claimant) decides the partition through its grant, and an update
	// revision it has not acknowledged moves no Pod.
	applied, err := governedPartition(ctx, cs, rev)
	if err != nil {
		return err
	}
	st.Rollout = applied
	p := cs.Spec.UpdateStrategy.Partition
	if applied != nil {
		p = &applied.Partition
	}
	var partition int32
	if p != nil {
		var err error
		if partition, err = step.ResolvePartition(*p, replicas); err != nil {
			return err
		}
	}
	updated := replicas - partition
	if rev == st.CurrentRevision {
		updated = replicas
	}
	if updated == replicas {
		st.CurrentRevision = rev
	}
	st.ObservedGeneration = cs.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas = replicas, replicas, replicas
	st.UpdatedReplicas, st.UpdatedReadyReplicas, st.UpdatedAvailableReplicas = updated, updated, updated
	if apiequalityStatus(cs.Status, st) {
		return nil
	}
	cs.Status = st
	return env.client.Status().Update(ctx, cs)
}

// governedPartition is what the CloneSet applies of the Rollout governing
// it; nil when none does.
func governedPartition(ctx context.Context, cs *stepwisev1.CloneSet, rev string) (*stepwisev1.CloneSetGovernor, error) {
	var list stepwisev1.RolloutList
	if err := env.client.List(ctx, &list, client.InNamespace(cs.Namespace)); err != nil {
		return nil, err
	}
	var naming []stepwisev1.Rollout
	for _, ro := range list.Items {
		if ro.Spec.WorkloadRef == cloneSetRef(cs.Name) {
			naming = append(naming, ro)
		}
	}
	ro := stepwisev1.Claimant(naming)
	if ro == nil {
		return nil, nil
	}
	gov := &stepwisev1.CloneSetGovernor{Name: ro.Name, Partition: intstr.FromString("100%")}
	if g := ro.Status.PartitionGrant; g != nil {
		gov.Revision = g.Revision
		if g.Revision == rev {
			gov.Partition = g.Partition
		}
	}
	return gov, nil
}

func apiequalityStatus(a, b stepwisev1.CloneSetStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// storeRevision creates the ControllerRevision of a template, as the
// CloneSet controller stores it (the template itself).
func storeRevision(ctx context.Context, cs *stepwisev1.CloneSet, rev string) error {
	data, err := json.Marshal(cs.Spec.Template)
	if err != nil {
		return err
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: rev, Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}},
		Data:       runtime.RawExtension{Raw: data},
		Revision:   1,
	}
	if err := env.client.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// partitionOf is the partition decided for a CloneSet: its governing
// Rollout's grant, else its spec's ("" when unset).
func partitionOf(t *testing.T, ns, name string) string {
	cs := getCloneSet(t, ns, name)
	var list stepwisev1.RolloutList
	if err := env.client.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var naming []stepwisev1.Rollout
	for _, ro := range list.Items {
		if ro.Spec.WorkloadRef == cloneSetRef(name) {
			naming = append(naming, ro)
		}
	}
	if ro := stepwisev1.Claimant(naming); ro != nil && ro.Status.PartitionGrant != nil {
		return ro.Status.PartitionGrant.Partition.String()
	}
	p := cs.Spec.UpdateStrategy.Partition
	if p == nil {
		return ""
	}
	return p.String()
}

// managersOfPartition lists the field managers owning an object's field at path.
func managersOfPartition(obj client.Object, path ...string) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		node, ok := fields, true
		for i, p := range path {
			child, found := node["f:"+p]
			if !found {
				ok = false
				break
			}
			if i < len(path)-1 {
				if node, ok = child.(map[string]any); !ok {
					break
				}
			}
		}
		if ok {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}
