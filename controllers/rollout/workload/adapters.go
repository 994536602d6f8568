package workload

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// cloneSet drives Stepwise's own CloneSet, read typed.
type cloneSet struct{ base }

func (w *cloneSet) Observe(ctx context.Context) (Observation, error) {
	cs := &v1alpha1.CloneSet{}
	if err := w.c.Reader.Get(ctx, w.key, cs); err != nil {
		return Observation{}, fmt.Errorf("reading %s: %w", w.describe(), err)
	}
	selector, err := selectorOf(cs.Spec.Selector)
	if err != nil {
		return Observation{}, fmt.Errorf("%s: %w", w.describe(), err)
	}
	return Observation{
		UID:                  cs.UID,
		Generation:           cs.Generation,
		ObservedGeneration:   cs.Status.ObservedGeneration,
		Replicas:             replicasOf(cs.Spec.Replicas),
		UpdatedReadyReplicas: cs.Status.UpdatedReadyReplicas,
		UpdateRevision:       cs.Status.UpdateRevision,
		CurrentRevision:      cs.Status.CurrentRevision,
		Partition:            governedPartition(cs.Status.Rollout),
		Selector:             selector,
		Images:               imagesOf(&cs.Spec.Template.Spec),
		// It rolls updated Pods back in place when the partition rises.
		RollsBack: true,
		Governed:  true,
		Acknowledged: func() string {
			if cs.Status.Rollout == nil {
				return ""
			}
			return cs.Status.Rollout.Revision
		}(),
	}, nil
}

// governedPartition is the partition a governed CloneSet applies, as its
// status reports it; every Pod kept back before it reports one, since it
// then moves none to a new revision.
func governedPartition(gov *v1alpha1.CloneSetGovernor) *intstr.IntOrString {
	if gov == nil {
		p := intstr.FromString("100%")
		return &p
	}
	p := gov.Partition
	return &p
}

// kruiseCloneSet drives OpenKruise's CloneSet. Its partition and the status
// fields read here have the same paths and meaning as in Stepwise's
// CloneSet, so only the decoding differs. Kruise moves Pods back when the
// partition rises only with its CloneSetPartitionRollback feature gate on,
// which no API shows: the CloneSet's KruisePartitionRollbackAnnotation says
// so, and without it the Rollout deletes canary Pods after an abort.
type kruiseCloneSet struct{ base }

func (w *kruiseCloneSet) Observe(ctx context.Context) (Observation, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(w.gvk)
	if err := w.c.Reader.Get(ctx, w.key, u); err != nil {
		if apimeta.IsNoMatchError(err) {
			return Observation{}, fmt.Errorf("%w: %s is not served by this cluster (is OpenKruise installed?): %v", ErrUnsupported, w.gvk.GroupVersion().WithKind(w.gvk.Kind), err)
		}
		return Observation{}, fmt.Errorf("reading %s: %w", w.describe(), err)
	}
	// Decode only the fields read here: the rest of Kruise's schema is not
	// ours to keep up with.
	var spec struct {
		Replicas        *int32                 `json:"replicas"`
		Selector        *metav1.LabelSelector  `json:"selector"`
		Template        corev1.PodTemplateSpec `json:"template"`
		MinReadySeconds int32                  `json:"minReadySeconds"`
		UpdateStrategy  struct {
			Partition      *intstr.IntOrString `json:"partition"`
			MaxUnavailable *intstr.IntOrString `json:"maxUnavailable"`
			MaxSurge       *intstr.IntOrString `json:"maxSurge"`
		} `json:"updateStrategy"`
	}
	var status struct {
		ObservedGeneration   int64  `json:"observedGeneration"`
		UpdatedReadyReplicas int32  `json:"updatedReadyReplicas"`
		UpdateRevision       string `json:"updateRevision"`
		CurrentRevision      string `json:"currentRevision"`
	}
	if err := fromUnstructured(u.Object, "spec", &spec); err != nil {
		return Observation{}, fmt.Errorf("decoding spec of %s: %w", w.describe(), err)
	}
	if err := fromUnstructured(u.Object, "status", &status); err != nil {
		return Observation{}, fmt.Errorf("decoding status of %s: %w", w.describe(), err)
	}
	selector, err := selectorOf(spec.Selector)
	if err != nil {
		return Observation{}, fmt.Errorf("%s: %w", w.describe(), err)
	}
	return Observation{
		UID:                  u.GetUID(),
		Generation:           u.GetGeneration(),
		ObservedGeneration:   status.ObservedGeneration,
		Replicas:             replicasOf(spec.Replicas),
		UpdatedReadyReplicas: status.UpdatedReadyReplicas,
		UpdateRevision:       status.UpdateRevision,
		CurrentRevision:      status.CurrentRevision,
		Partition:            spec.UpdateStrategy.Partition,
		Selector:             selector,
		Images:               imagesOf(&spec.Template.Spec),
		RollsBack:            u.GetAnnotations()[v1alpha1.KruisePartitionRollbackAnnotation] == "true",
		// Kruise's default is 20%, rounded up unless a surge is allowed.
		MaxUnavailable: budget(spec.UpdateStrategy.MaxUnavailable, intstr.FromString("20%"), replicasOf(spec.Replicas),
			spec.UpdateStrategy.MaxSurge == nil || isZero(*spec.UpdateStrategy.MaxSurge)),
		MinReadySeconds: spec.MinReadySeconds,
	}, nil
}

// statefulSet drives an apps/v1 StatefulSet through
// spec.updateStrategy.rollingUpdate.partition, an integer: percents are
// resolved against spec.replicas when written (and written again when
// replicas change, since the observation then no longer holds the step).
//
// A StatefulSet reports no updatedReadyReplicas. It is derived as
// readyReplicas - (replicas - updatedReplicas), clamped to
// [0, updatedReplicas]: exact while every Pod left on the old revision is
// ready, and otherwise an undercount, so the workload gate waits rather than
// passes on Pods that are not ready. availableReplicas is not used: it
// counts Pods of both revisions alike.
type statefulSet struct{ base }

func (w *statefulSet) Observe(ctx context.Context) (Observation, error) {
	sts := &appsv1.StatefulSet{}
	if err := w.c.Reader.Get(ctx, w.key, sts); err != nil {
		return Observation{}, fmt.Errorf("reading %s: %w", w.describe(), err)
	}
	if sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return Observation{}, fmt.Errorf("%w: %s uses updateStrategy OnDelete, which has no partition: use RollingUpdate", ErrUnsupported, w.describe())
	}
	selector, err := selectorOf(sts.Spec.Selector)
	if err != nil {
		return Observation{}, fmt.Errorf("%s: %w", w.describe(), err)
	}
	var partition *intstr.IntOrString
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		p := intstr.FromInt32(*ru.Partition)
		partition = &p
	}
	// The StatefulSet controller's default and rounding (down, at least 1).
	var maxUnavailable *intstr.IntOrString
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		maxUnavailable = ru.MaxUnavailable
	}
	st := sts.Status
	updatedReady := min(max(st.ReadyReplicas-(st.Replicas-st.UpdatedReplicas), 0), st.UpdatedReplicas)
	return Observation{
		UID:                  sts.UID,
		Generation:           sts.Generation,
		ObservedGeneration:   st.ObservedGeneration,
		Replicas:             replicasOf(sts.Spec.Replicas),
		UpdatedReadyReplicas: updatedReady,
		UpdateRevision:       st.UpdateRevision,
		CurrentRevision:      st.CurrentRevision,
		Partition:            partition,
		CountsOnly:           true,
		Selector:             selector,
		Images:               imagesOf(&sts.Spec.Template.Spec),
		MaxUnavailable:       budget(maxUnavailable, intstr.FromInt32(1), replicasOf(sts.Spec.Replicas), false),
		MinReadySeconds:      sts.Spec.MinReadySeconds,
	}, nil
}

// budget resolves an update budget (maxUnavailable) to Pods, def when
// unset, and never below 1: a rollback must be able to move a Pod.
func budget(v *intstr.IntOrString, def intstr.IntOrString, replicas int32, roundUp bool) int32 {
	n, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(v, def), int(replicas), roundUp)
	if err != nil || n < 1 {
		return 1
	}
	return int32(n)
}

func isZero(v intstr.IntOrString) bool {
	return v.Type == intstr.Int && v.IntVal == 0 || v.Type == intstr.String && (v.StrVal == "0" || v.StrVal == "0%")
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("invalid selector: %w", err)
	}
	return selector, nil
}

// fromUnstructured decodes obj[field] into out; a missing field leaves out as is.
func fromUnstructured(obj map[string]any, field string, out any) error {
	m, ok := obj[field].(map[string]any)
	if !ok {
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, out)
}
