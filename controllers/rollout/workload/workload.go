// Package workload is the Rollout controller's view of the workloads it
// drives: what they report (Observe) and the one field it writes, the
// partition (SetPartition). Three adapters implement it: Stepwise's own
// CloneSet, OpenKruise's CloneSet (read as unstructured, since its types are
// not a dependency) and the apps/v1 StatefulSet.
//
// The partition is written with server-side apply under FieldManager,
// applying nothing but the partition field, so that git (Flux, Argo CD)
// keeps owning every other field and the controller owns the partition. A
// manifest in git that also sets the partition fights the controller;
// PartitionManagers names the other writers so the Rollout can say so.
package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
)

// FieldManager is the server-side apply field manager that owns the partition.
const FieldManager = "stepwise-rollout"

// ErrUnsupported marks a workload the controller cannot drive (an unknown
// kind, a CRD that is not installed, a StatefulSet with the OnDelete
// strategy). Retrying does not help: the Rollout is stalled until its spec or
// the workload changes.
var ErrUnsupported = errors.New("unsupported workload")

// Workload is one workload a Rollout drives.
type Workload interface {
	// Observe reads the workload from the informer cache.
	Observe(ctx context.Context) (Observation, error)
	// SetPartition applies p with server-side apply as FieldManager, forcing
	// ownership, and nothing else. obs is the observation it follows: its UID
	// guards against creating a deleted workload again, and its replicas
	// resolve a percent for a workload that stores counts only.
	SetPartition(ctx context.Context, obs Observation, p intstr.IntOrString) error
	// PartitionManagers reads the workload's managed fields from the API
	// server (the cache strips them) and returns the field managers other
	// than FieldManager that own the partition field, sorted. It costs a
	// request: call it only when the partition is not what was set.
	PartitionManagers(ctx context.Context) ([]string, error)
	// PodNames returns the names of the workload's Pods on revision.
	PodNames(ctx context.Context, obs Observation, revision string) ([]string, error)
	// Revision reads what a revision runs; Found is false when neither its
	// ControllerRevision nor a Pod on it exists any more.
	Revision(ctx context.Context, obs Observation, name string) (Revision, error)
	// Pods lists the Pods the workload controls (its controller owner
	// reference), from the cache. They are the cache's own objects, not
	// copies (a round reads 1000 Pods at a time): read only.
	Pods(ctx context.Context, obs Observation) ([]*corev1.Pod, error)
	// DeletePod deletes the workload's Pod name, only while it is the Pod
	// that was read (uid is a precondition), so that a Pod a StatefulSet recreated under
	// the same name is never deleted for its predecessor. A Pod already
	// gone or replaced is not an error.
	DeletePod(ctx context.Context, name string, uid types.UID) error
}

// Observation is what a workload reports.
type Observation struct {
	UID                types.UID
	Generation         int64
	ObservedGeneration int64
	// Replicas is spec.replicas (1 when unset).
	Replicas int32
	// UpdatedReadyReplicas is the number of ready Pods on UpdateRevision
	// (a lower bound for a StatefulSet, see the adapter).
	UpdatedReadyReplicas int32
	UpdateRevision       string
	CurrentRevision      string
	// Partition is the partition stored in spec; nil when unset.
	Partition *intstr.IntOrString
	// CountsOnly is true when the workload stores a count, not a percent
	// (a StatefulSet): percents are resolved against Replicas before writing.
	CountsOnly bool
	// Selector selects the workload's Pods; nil when it has none.
	Selector labels.Selector
	// Images of the current template, by container name.
	Images map[string]string
	// Governed is true for Stepwise's CloneSet, which takes its partition
	// from the Rollout's status.partitionGrant rather than from a partition
	// the Rollout writes: SetPartition is not called for it, and Partition
	// is what the CloneSet reports it applies (status.rollout.partition).
	Governed bool
	// Acknowledged is, for a governed workload, the grant's revision it
	// applies (status.rollout.revision).
	Acknowledged string
	// RollsBack is true when the workload moves Pods already updated back to
	// its current revision by itself once the partition rises (Stepwise's
	// CloneSet; OpenKruise's with its CloneSetPartitionRollback gate, which
	// the CloneSet's KruisePartitionRollbackAnnotation declares). Otherwise
	// the Rollout deletes them after an abort, and the workload recreates
	// them on its current revision.
	RollsBack bool
	// MaxUnavailable is the workload's update budget resolved to Pods, at
	// least 1: how many of its Pods may be unavailable at once.
	MaxUnavailable int32
	// MinReadySeconds is how long a Pod must be ready to count as available.
	MinReadySeconds int32
}

// Revision is what a revision of the workload runs.
type Revision struct {
	Found bool
	// Images by container name (init containers included).
	Images map[string]string
	// Created is when the revision was first seen (its ControllerRevision's
	// creation time); zero when unknown.
	Created time.Time
}

// ObservedGenerationCurrent reports whether the status describes the latest spec.
func (o Observation) ObservedGenerationCurrent() bool {
	return o.ObservedGeneration >= o.Generation
}

// PartitionPods is the stored partition resolved to Pods; unset is 0, as
// every supported workload defaults it.
func (o Observation) PartitionPods() (int32, error) {
	if o.Partition == nil {
		return 0, nil
	}
	return step.ResolvePartition(*o.Partition, o.Replicas)
}

// Stored is p as the workload stores it.
func (o Observation) Stored(p intstr.IntOrString) (intstr.IntOrString, error) {
	if !o.CountsOnly || p.Type == intstr.Int {
		return p, nil
	}
	n, err := step.ResolvePartition(p, o.Replicas)
	if err != nil {
		return intstr.IntOrString{}, err
	}
	return intstr.FromInt32(n), nil
}

// Holds reports whether the workload already stores p, literally: "50%"
// and 5 of 10 are not the same, since only the percent keeps its meaning
// when the workload scales.
func (o Observation) Holds(p intstr.IntOrString) bool {
	want, err := o.Stored(p)
	if err != nil || o.Partition == nil {
		return false
	}
	return *o.Partition == want
}

// Clients are the API accesses an adapter needs.
type Clients struct {
	// Reader reads from the informer cache (managed fields stripped).
	Reader client.Reader
	// Writer applies the partition.
	Writer client.Client
	// APIReader reads around the cache, for managed fields.
	APIReader client.Reader
	// Pods reads the cached Pods without copying them (controllers/podcache).
	Pods PodLister
}

// PodLister lists the cached Pods of a namespace that a selector matches.
// They are the cache's own objects: nothing may change them.
type PodLister interface {
	List(namespace string, selector labels.Selector) ([]*corev1.Pod, error)
}

// Kinds the controller drives.
var (
	CloneSetGVK       = v1alpha1.GroupVersion.WithKind("CloneSet")
	KruiseCloneSetGVK = schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "CloneSet"}
	StatefulSetGVK    = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
)

// New returns the adapter for ref, a workload in namespace.
func New(ref v1alpha1.WorkloadReference, namespace string, c Clients) (Workload, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: workloadRef.apiVersion %q: %v", ErrUnsupported, ref.APIVersion, err)
	}
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	switch gv.WithKind(ref.Kind) {
	case CloneSetGVK:
		return &cloneSet{base{gvk: CloneSetGVK, key: key, path: cloneSetPartitionPath, c: c}}, nil
	case KruiseCloneSetGVK:
		return &kruiseCloneSet{base{gvk: KruiseCloneSetGVK, key: key, path: cloneSetPartitionPath, c: c}}, nil
	case StatefulSetGVK:
		return &statefulSet{base{gvk: StatefulSetGVK, key: key, path: statefulSetPartitionPath, c: c}}, nil
	}
	return nil, fmt.Errorf("%w: %s %s (supported: stepwise.dev/v1alpha1 CloneSet, apps.kruise.io/v1alpha1 CloneSet, apps/v1 StatefulSet)",
		ErrUnsupported, ref.APIVersion, ref.Kind)
}

// PartitionPath returns the partition field of a kind, for messages
// ("spec.updateStrategy.partition").
func PartitionPath(gvk schema.GroupVersionKind) string {
	if gvk == StatefulSetGVK {
		return joinPath(statefulSetPartitionPath)
	}
	return joinPath(cloneSetPartitionPath)
}

// imagesOf lists a Pod spec's images by container name.
func imagesOf(spec *corev1.PodSpec) map[string]string {
	images := make(map[string]string, len(spec.Containers)+len(spec.InitContainers))
	for _, c := range spec.InitContainers {
		images[c.Name] = c.Image
	}
	for _, c := range spec.Containers {
		images[c.Name] = c.Image
	}
	return images
}
