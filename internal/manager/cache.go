package manager

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
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

// intern returns s backed by the one copy the unique package keeps of
// equal strings. The decoder allocates every string of every Pod anew, but
// most of them (namespace, labels, owner, node, images, condition types)
// are the same in all the Pods of a workload; interned, the Pods share
// their bytes. Strings are immutable, so sharing them cannot leak a write
// from one Pod into another.
//
// Only strings that repeat across Pods are worth it: a Pod's own name,
// uid, resourceVersion, container IDs and messages would each be copied
// once more into unique's map, for nothing.
//
// unique keeps its copy only while a Handle to it lives, and no Handle is
// kept here (only the string), so after a garbage collection the next Pod
// decoded makes a new copy: equal strings are shared by the Pods decoded
// between two collections, not by all of them. That still turns one copy
// per Pod into one per collection cycle, without a table of our own that
// would have to be pruned; the loss is small even when the collector runs
// often: BenchmarkCachedPodBytes with GOGC=5 kept 4,752 bytes per Pod,
// against 4,745 at the default GOGC=100.
func intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
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

// podMetaTable holds one label map per distinct label set, one owner list
// per distinct list, and one container list and readiness-gate list per
// distinct one, for the cached Pods to share: the Pods of one revision of
// a workload carry the same labels, owner, containers and gates. A map of
// up to eight labels takes about 330 bytes however few it holds (about
// 3.5 MB at 10,800 Pods), an owner list about 100, and a container, even
// trimmed to its name and image, 408 (its type's size): a sidecar and an
// app container were about 9 MB at 10,800 Pods.
//
// Sharing is safe because nothing writes into a cached object: every write
// goes to a copy, whose DeepCopy copies the map and the list, and make
// test-integration runs the manager with client-go's cache mutation
// detector (TestTrimPodSharesLabelSetsAndOwnerLists shows the sharing).
// The table is not pruned entry by entry: when it reaches
// maxPodMetaEntries distinct sets it starts again empty, and the Pods that
// hold the old maps keep them, so the cost of a cluster with more shapes
// than that is some maps held twice, never a wrong label.
type podMetaTable struct {
	mu         sync.Mutex
	labels     map[string]map[string]string
	owners     map[string][]metav1.OwnerReference
	containers map[string][]corev1.Container
	gates      map[string][]corev1.PodReadinessGate
}

// maxPodMetaEntries bounds each table: about 500 bytes a label set with its
// key, so at most about 2 MB.
const maxPodMetaEntries = 4096

func newPodMetaTable() *podMetaTable {
	return &podMetaTable{
		labels:     map[string]map[string]string{},
		owners:     map[string][]metav1.OwnerReference{},
		containers: map[string][]corev1.Container{},
		gates:      map[string][]corev1.PodReadinessGate{},
	}
}

// labelSet returns the table's map for labels' keys and values, adding a
// copy of labels (interned) when it has none.
func (t *podMetaTable) labelSet(labels map[string]string) map[string]string {
	return shareOrAdd(&t.mu, t.labels, labelSetKey(labels), func() map[string]string {
		m := make(map[string]string, len(labels))
		for k, v := range labels {
			m[intern(k)] = intern(v)
		}
		return m
	})
}

// ownerList returns the table's list equal to owners, adding a copy of
// owners (interned) when it has none.
func (t *podMetaTable) ownerList(owners []metav1.OwnerReference) []metav1.OwnerReference {
	return shareOrAdd(&t.mu, t.owners, ownerListKey(owners), func() []metav1.OwnerReference {
		list := make([]metav1.OwnerReference, len(owners))
		for i, o := range owners {
			list[i] = metav1.OwnerReference{
				APIVersion: intern(o.APIVersion), Kind: intern(o.Kind), Name: intern(o.Name), UID: intern(o.UID),
				Controller: o.Controller, BlockOwnerDeletion: o.BlockOwnerDeletion,
			}
		}
		return list
	})
}

// shareOrAdd returns table's value for key, under mu, adding build's when
// the table has none; a table at maxPodMetaEntries starts again empty.
func shareOrAdd[V any](mu *sync.Mutex, table map[string]V, key string, build func() V) V {
	mu.Lock()
	defer mu.Unlock()
	if v, ok := table[key]; ok {
		return v
	}
	if len(table) >= maxPodMetaEntries {
		clear(table)
	}
	v := build()
	table[key] = v
	return v
}

// labelSetKey is labels in key order, a NUL after every key and value
// (neither may contain one).
func labelSetKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	size := 0
	for k, v := range labels {
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// ownerListKey is every owner's apiVersion, kind, name and uid, a NUL
// after each, then its two flags (t, f, or - when unset).
func ownerListKey(owners []metav1.OwnerReference) string {
	var b strings.Builder
	flag := func(p *bool) byte {
		switch {
		case p == nil:
			return '-'
		case *p:
			return 't'
		}
		return 'f'
	}
	for _, o := range owners {
		for _, field := range []string{o.APIVersion, o.Kind, o.Name, string(o.UID)} {
			b.WriteString(field)
			b.WriteByte(0)
		}
		b.WriteByte(flag(o.Controller))
		b.WriteByte(flag(o.BlockOwnerDeletion))
	}
	return b.String()
}

// readinessGates returns the table's list of these gates, adding a copy
// (types interned) when it has none.
func (t *podMetaTable) readinessGates(gates []corev1.PodReadinessGate) []corev1.PodReadinessGate {
	if gates == nil {
		return nil
	}
	var key strings.Builder
	for _, g := range gates {
		key.WriteString(string(g.ConditionType))
		key.WriteByte(0)
	}
	return shareOrAdd(&t.mu, t.gates, key.String(), func() []corev1.PodReadinessGate {
		out := make([]corev1.PodReadinessGate, len(gates))
		for i, g := range gates {
			out[i] = corev1.PodReadinessGate{ConditionType: intern(g.ConditionType)}
		}
		return out
	})
}

// readCondition tells the Pod conditions a controller reads: Ready (is the
// Pod serving, since when) and InPlaceUpdateReady (the engine's gate). The
// others (PodScheduled, Initialized, ContainersReady,
// PodReadyToStartContainers, a DisruptionTarget) are read by nobody here
// and are never written: the engine writes conditions by a strategic merge
// patch keyed by type, naming only its own.
func readCondition(t corev1.PodConditionType) bool {
	return t == corev1.PodReady || t == stepwisev1.InPlaceUpdateReady
}

// podConditions keeps the conditions the controllers read (readCondition)
// in a slice of their length, with their types, statuses and reasons
// interned. A Pod's six conditions sat in the decoder's room for eight
// (1,024 bytes), where its two read ones take 240.
func podConditions(conditions []corev1.PodCondition) []corev1.PodCondition {
	if conditions == nil {
		return nil
	}
	n := 0
	for _, c := range conditions {
		if readCondition(c.Type) {
			n++
		}
	}
	out := make([]corev1.PodCondition, 0, n)
	for _, c := range conditions {
		if !readCondition(c.Type) {
			continue
		}
		c.Type = intern(c.Type)
		c.Status = intern(c.Status)
		c.Reason = intern(c.Reason)
		out = append(out, c)
	}
	return out
}

// containerList returns the table's list of containers with these names,
// images and restart policies, the fields pkg/inplace reads (an init
// container's restart policy makes it a sidecar), adding one when it has
// none.
func (t *podMetaTable) containerList(containers []corev1.Container) []corev1.Container {
	if containers == nil {
		return nil
	}
	var key strings.Builder
	for _, c := range containers {
		key.WriteString(c.Name)
		key.WriteByte(0)
		key.WriteString(c.Image)
		key.WriteByte(0)
		if c.RestartPolicy != nil {
			key.WriteString(string(*c.RestartPolicy))
		} else {
			key.WriteByte('-')
		}
		key.WriteByte(0)
	}
	return shareOrAdd(&t.mu, t.containers, key.String(), func() []corev1.Container {
		out := make([]corev1.Container, len(containers))
		for i, c := range containers {
			out[i] = corev1.Container{Name: intern(c.Name), Image: intern(c.Image)}
			if c.RestartPolicy != nil {
				out[i].RestartPolicy = ptr.To(*c.RestartPolicy)
			}
		}
		return out
	})
}

// currentStatuses keeps what tells a restarted container on its new image
// from the old one, and whether it is ready.
func currentStatuses(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	if statuses == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(statuses))
	for i, s := range statuses {
		out[i] = corev1.ContainerStatus{
			Name: intern(s.Name), Image: intern(s.Image), ImageID: intern(s.ImageID), ContainerID: s.ContainerID,
			Ready: s.Ready, Started: s.Started, RestartCount: s.RestartCount, State: s.State,
		}
	}
	return out
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
