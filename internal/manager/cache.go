package manager

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/podcache"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// What the informer cache holds, and in what shape, decides the manager's
// memory: Pods, ControllerRevisions and StatefulSets are watched in every
// namespace, and a cluster has many more of them than Stepwise drives.
//
// Objects read from this cache are trimmed (see trim). Nothing may Update
// an object read from it, or the fields the transform dropped would be
// written back empty: the controllers write with patches and server-side
// apply, built from what they mean to change.

// PodSelector is the label rule of the Pod cache: only Pods that carry
// controller-revision-hash. Every Pod a controller reads carries it:
//   - the CloneSet controller lists the Pods it controls, and stamps the
//     label on each Pod it creates;
//   - the Rollout lists its workload's Pods on one revision, by the
//     workload's selector plus controller-revision-hash=<revision>, which
//     StatefulSets and OpenKruise CloneSets set on their Pods as Stepwise's
//     CloneSet does.
//
// Deployment (pod-template-hash), Job and bare Pods, usually most of a
// cluster, stay out of memory. A CloneSet Pod whose label someone removed
// is no longer seen by its CloneSet, which then creates a replacement, as
// a ReplicaSet does for a Pod taken out of its selector.
func PodSelector() labels.Selector {
	req, err := labels.NewRequirement(appsv1.ControllerRevisionHashLabelKey, selection.Exists, nil)
	if err != nil {
		// A constant, valid key: unreachable.
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}

// AnalysisJobSelector is the label rule of the Job cache: only the Jobs
// job metrics create, which carry AnalysisRolloutLabel.
func AnalysisJobSelector() labels.Selector {
	req, err := labels.NewRequirement(stepwisev1.AnalysisRolloutLabel, selection.Exists, nil)
	if err != nil {
		// A constant, valid key: unreachable.
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}

// cacheOptions scopes the cache to namespaces (every namespace when empty)
// and applies the Pod selector and trim; pods learns the Pod informers, for
// the controllers' reads.
func cacheOptions(namespaces []string, pods *podcache.Stores) cache.Options {
	opts := cache.Options{
		DefaultTransform: newTrim(),
		NewInformer:      pods.NewInformer,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: PodSelector()},
			// Only the Jobs analysis creates: a cluster's other Jobs (and
			// CronJobs' history) stay out of memory.
			&batchv1.Job{}: {Label: AnalysisJobSelector()},
		},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// newTrim returns the cache transform, trim, with its own table of the
// label sets and owner lists the cached Pods share (podMetaTable).
func newTrim() func(any) (any, error) {
	shared := newPodMetaTable()
	return func(in any) (any, error) { return trim(in, shared) }
}

// trim is the cache transform. From every object it drops managedFields
// (read around the cache when needed, see workload.PartitionManagers) and
// kubectl's last-applied-configuration annotation, each often as large as
// the spec. From the workloads the Rollout only observes (StatefulSets,
// OpenKruise CloneSets) and their ControllerRevisions it drops what no
// controller reads, and from Pods what neither the CloneSet controller nor
// the Rollout reads (trimPod); Stepwise's own CloneSets and their
// revisions are read whole and kept whole.
func trim(in any, shared *podMetaTable) (any, error) {
	if obj, err := apimeta.Accessor(in); err == nil {
		if obj.GetManagedFields() != nil {
			obj.SetManagedFields(nil)
		}
		if a := obj.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
				obj.SetAnnotations(a)
			}
		}
	}
	switch o := in.(type) {
	case *corev1.Pod:
		trimPod(o, shared)
	case *appsv1.StatefulSet:
		trimStatefulSet(o)
	case *appsv1.ControllerRevision:
		trimRevision(o)
	case *unstructured.Unstructured:
		if o.GroupVersionKind() == workload.KruiseCloneSetGVK {
			trimKruiseCloneSet(o)
		}
	}
	return in, nil
}

// trimPod keeps what the controllers read of a Pod: all of its metadata
// (labels, annotations with the in-place records, owners), the node it is
// bound to, its readiness gates, its containers' names and images (and an
// init container's restart policy, which makes it a sidecar), its phase,
// its Ready and InPlaceUpdateReady conditions and the containers' current
// statuses. The rest of the spec
// (volumes, env, probes, resources, tolerations and so on) and of the
// status (last terminations, IPs, resources) goes: at 10,000 Pods the
// dropped part was about half of the manager's live heap. Pods are written
// only with patches computed between two copies of a cached Pod, so a
// field absent from both is never in a patch.
//
// What is kept is then compacted (compactPodMeta, and the copies below):
// every value a reader sees is unchanged, but strings the Pods of a
// workload repeat share one copy, and slices are exactly as long as their
// contents. BenchmarkCachedPodBytes (a CloneSet Pod as the kubelet
// reports it, decoded from protobuf as the informer does) measured 5,894
// bytes per cached Pod before and 4,745 after, which at 10,000 Pods is
// about 11 MiB less live heap, for about 4 µs more CPU per Pod event
// (BenchmarkDecodeAndTrimPod); keeping only the two conditions read
// (podConditions) took it to 4,215, sharing the label maps and owner
// lists of a revision's Pods (podMetaTable) to 3,779, with no more CPU,
// and sharing their container lists and readiness gates too to 2,904.
// Most of what remains is the Pod and ContainerStatus structs themselves,
// whose size their types fix (1,240 and 208 bytes), and the annotation
// map, which holds each Pod's own in-place state.
func trimPod(pod *corev1.Pod, shared *podMetaTable) {
	compactPodMeta(&pod.ObjectMeta, shared)
	spec := &pod.Spec
	*spec = corev1.PodSpec{
		NodeName:       intern(spec.NodeName),
		ReadinessGates: shared.readinessGates(spec.ReadinessGates),
		InitContainers: shared.containerList(spec.InitContainers),
		Containers:     shared.containerList(spec.Containers),
	}
	status := &pod.Status
	*status = corev1.PodStatus{
		Phase:                 intern(status.Phase),
		Conditions:            podConditions(status.Conditions),
		Reason:                intern(status.Reason),
		Message:               status.Message,
		InitContainerStatuses: currentStatuses(status.InitContainerStatuses),
		ContainerStatuses:     currentStatuses(status.ContainerStatuses),
	}
}

// compactPodMeta interns the strings of a Pod's metadata that its
// workload's Pods share (namespace, generateName, annotation keys; the
// annotations' values, like the in-place state, are the Pod's own) and
// gives the Pod the label map and owner list that the table holds for
// its labels and owners. Annotations are copied into a new map to intern
// their keys, which a map cannot change in place.
func compactPodMeta(meta *metav1.ObjectMeta, shared *podMetaTable) {
	meta.Namespace = intern(meta.Namespace)
	meta.GenerateName = intern(meta.GenerateName)
	if meta.Labels != nil {
		meta.Labels = shared.labelSet(meta.Labels)
	}
	if meta.Annotations != nil {
		annotations := make(map[string]string, len(meta.Annotations))
		for k, v := range meta.Annotations {
			annotations[intern(k)] = v
		}
		meta.Annotations = annotations
	}
	if meta.OwnerReferences != nil {
		meta.OwnerReferences = shared.ownerList(meta.OwnerReferences)
	}
}

// trimStatefulSet keeps what the Rollout's StatefulSet adapter observes:
// replicas, selector, update strategy, the containers' names and images,
// and status. The rest of the Pod template and the volume claim templates
// go.
func trimStatefulSet(sts *appsv1.StatefulSet) {
	spec := &sts.Spec.Template.Spec
	*spec = corev1.PodSpec{
		InitContainers: imagesOnly(spec.InitContainers),
		Containers:     imagesOnly(spec.Containers),
	}
	sts.Spec.Template.ObjectMeta = metav1.ObjectMeta{}
	sts.Spec.VolumeClaimTemplates = nil
}

func imagesOnly(containers []corev1.Container) []corev1.Container {
	if containers == nil {
		return nil
	}
	out := make([]corev1.Container, len(containers))
	for i, c := range containers {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	return out
}

// trimKruiseCloneSet keeps what the Rollout's OpenKruise adapter decodes:
// spec.replicas, spec.selector, spec.updateStrategy, the template's
// containers' names and images, and status.
func trimKruiseCloneSet(u *unstructured.Unstructured) {
	spec, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return
	}
	kept := map[string]any{}
	for _, field := range []string{"replicas", "selector", "updateStrategy"} {
		if v, ok := spec[field]; ok {
			kept[field] = v
		}
	}
	podSpec := map[string]any{}
	if template, ok := spec["template"].(map[string]any); ok {
		if ps, ok := template["spec"].(map[string]any); ok {
			for _, field := range []string{"initContainers", "containers"} {
				if list, ok := ps[field].([]any); ok {
					podSpec[field] = unstructuredImagesOnly(list)
				}
			}
		}
	}
	kept["template"] = map[string]any{"spec": podSpec}
	u.Object["spec"] = kept
}

func unstructuredImagesOnly(list []any) []any {
	out := make([]any, 0, len(list))
	for _, item := range list {
		c, ok := item.(map[string]any)
		if !ok {
			continue
		}
		kept := map[string]any{}
		for _, field := range []string{"name", "image"} {
			if v, ok := c[field]; ok {
				kept[field] = v
			}
		}
		out = append(out, kept)
	}
	return out
}

var (
	cloneSetKind       = stepwisev1.GroupVersion.WithKind("CloneSet").GroupKind()
	statefulSetKind    = workload.StatefulSetGVK.GroupKind()
	kruiseCloneSetKind = workload.KruiseCloneSetGVK.GroupKind()
)

// trimRevision keeps a Stepwise CloneSet's revisions whole: the CloneSet
// controller builds Pods from them and diffs them. Of a StatefulSet's or an
// OpenKruise CloneSet's revisions the Rollout reads only the containers'
// images (workload.Revision), so their data is cut down to those, in the
// {"spec":{"template":...}} form both store. The data of a revision that
// another kind controls (a DaemonSet's) is read by nobody and goes. A
// revision without a controller is kept whole: the Rollout reads a
// revision by the name its workload reports, whoever made it.
func trimRevision(rev *appsv1.ControllerRevision) {
	owner := metav1.GetControllerOf(rev)
	if owner == nil {
		return
	}
	var kind schema.GroupKind
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err == nil {
		kind = gv.WithKind(owner.Kind).GroupKind()
	}
	switch kind {
	case cloneSetKind:
		return
	case statefulSetKind, kruiseCloneSetKind:
		rev.Data.Raw = revisionImages(rev.Data.Raw)
	default:
		rev.Data.Raw = nil
	}
	rev.Data.Object = nil
}

// revisionImages re-encodes a {"spec":{"template":...}} revision with the
// containers' names and images only. Data that does not decode is kept as
// is: the Rollout reports it when it reads it.
func revisionImages(raw []byte) []byte {
	var patch struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &patch); err != nil || patch.Spec.Template == nil {
		return raw
	}
	type container struct {
		Name  string `json:"name"`
		Image string `json:"image,omitempty"`
	}
	type podSpec struct {
		InitContainers []container `json:"initContainers,omitempty"`
		Containers     []container `json:"containers"`
	}
	list := func(cs []corev1.Container) []container {
		var out []container
		for _, c := range cs {
			out = append(out, container{Name: c.Name, Image: c.Image})
		}
		return out
	}
	var slim struct {
		Spec struct {
			Template struct {
				Spec podSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	slim.Spec.Template.Spec = podSpec{
		InitContainers: list(patch.Spec.Template.Spec.InitContainers),
		Containers:     list(patch.Spec.Template.Spec.Containers),
	}
	out, err := json.Marshal(slim)
	if err != nil {
		return raw
	}
	return out
}
