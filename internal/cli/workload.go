package cli

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Workload is what the plugin reads from the workload a Rollout drives. The
// three supported kinds share these fields, except that a StatefulSet keeps
// its partition under rollingUpdate and reports no updatedReadyReplicas.
type Workload struct {
	APIVersion      string
	Kind            string
	Name            string
	ResourceVersion string

	Generation         int64
	ObservedGeneration int64
	// Replicas is spec.replicas, 1 when unset as the API server defaults it.
	Replicas int32
	// Partition is the partition the workload applies: its spec's, or,
	// for a CloneSet a Rollout governs, the Rollout's grant as the CloneSet
	// reports it (status.rollout.partition). Nil when there is none.
	Partition *intstr.IntOrString

	UpdatedReplicas int32
	// UpdatedReadyReplicas is nil for kinds that do not report it; callers
	// fall back on the Rollout's own record of it.
	UpdatedReadyReplicas *int32
	ReadyReplicas        int32
	UpdateRevision       string
	CurrentRevision      string
}

// GenerationObserved is the first half of the workload gate.
func (w *Workload) GenerationObserved() bool {
	return w.ObservedGeneration >= w.Generation
}

// WorkloadFromUnstructured reads the fields by path so that one function
// serves CloneSets of both groups and StatefulSets without their Go types.
func WorkloadFromUnstructured(u *unstructured.Unstructured) (*Workload, error) {
	w := &Workload{
		APIVersion:      u.GetAPIVersion(),
		Kind:            u.GetKind(),
		Name:            u.GetName(),
		ResourceVersion: u.GetResourceVersion(),
		Generation:      u.GetGeneration(),
		Replicas:        1,
	}
	var err error
	read := func(into *int32, path ...string) {
		if err != nil {
			return
		}
		v, found, e := unstructured.NestedFieldNoCopy(u.Object, path...)
		if e != nil || !found || v == nil {
			err = e
			return
		}
		n, ok := asInt64(v)
		if !ok {
			err = fmt.Errorf("%s %s: field %v is %T, not an integer", w.Kind, w.Name, path, v)
			return
		}
		*into = int32(n)
	}
	read(&w.Replicas, "spec", "replicas")
	read(&w.UpdatedReplicas, "status", "updatedReplicas")
	read(&w.ReadyReplicas, "status", "readyReplicas")
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "updatedReadyReplicas"); found {
		w.UpdatedReadyReplicas = new(int32)
		read(w.UpdatedReadyReplicas, "status", "updatedReadyReplicas")
	}
	if err != nil {
		return nil, err
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration"); found {
		n, _ := asInt64(v)
		w.ObservedGeneration = n
	}
	w.UpdateRevision, _, _ = unstructured.NestedString(u.Object, "status", "updateRevision")
	w.CurrentRevision, _, _ = unstructured.NestedString(u.Object, "status", "currentRevision")

	partitionPath := []string{"spec", "updateStrategy", "partition"}
	switch {
	case w.Kind == "StatefulSet":
		partitionPath = []string{"spec", "updateStrategy", "rollingUpdate", "partition"}
	case w.APIVersion == stepwisev1.GroupVersion.String():
		// A CloneSet a Rollout governs applies the Rollout's grant, which
		// it reports; its spec's partition is then ignored.
		if _, governed, _ := unstructured.NestedMap(u.Object, "status", "rollout"); governed {
			partitionPath = []string{"status", "rollout", "partition"}
		}
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, partitionPath...); found && v != nil {
		switch p := v.(type) {
		case string:
			w.Partition = new(intstr.FromString(p))
		default:
			n, ok := asInt64(v)
			if !ok {
				return nil, fmt.Errorf("%s %s: partition is %T, not an integer or a percent", w.Kind, w.Name, v)
			}
			w.Partition = new(intstr.FromInt32(int32(n)))
		}
	}
	return w, nil
}

// asInt64 accepts the number types JSON decoding produces.
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

// StepTarget is how many updated Pods must be ready for the workload gate of
// a step: replicas minus the partition, a percent rounded up as the CRD
// documents. It also returns the partition as a count.
func StepTarget(replicas int32, partition intstr.IntOrString) (target, kept int32, err error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&partition, int(replicas), true)
	if err != nil {
		return 0, 0, fmt.Errorf("partition %s: %w", partition.String(), err)
	}
	kept = int32(min(max(n, 0), int(replicas)))
	return replicas - kept, kept, nil
}
