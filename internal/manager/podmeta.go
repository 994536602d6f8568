package manager

import (
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

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
