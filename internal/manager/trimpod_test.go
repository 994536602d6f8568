package manager

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"unique"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// decodedPod is servedPod(i) as the informer gets it: decoded from
// protobuf, so that each of its strings is a copy of its own, as the
// decoder makes them (servedPod's literals would share their bytes).
func decodedPod(t *testing.T, i int) *corev1.Pod {
	t.Helper()
	raw, err := servedPod(i).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := pod.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	return pod
}

// plainTrim is what trimPod kept before it compacted: the same fields,
// with the decoder's strings and slices.
func plainTrim(in *corev1.Pod) *corev1.Pod {
	pod := in.DeepCopy()
	pod.ManagedFields = nil
	containers := func(cs []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range cs {
			out = append(out, corev1.Container{Name: c.Name, Image: c.Image, RestartPolicy: c.RestartPolicy})
		}
		return out
	}
	statuses := func(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
		var out []corev1.ContainerStatus
		for _, s := range ss {
			out = append(out, corev1.ContainerStatus{Name: s.Name, Image: s.Image, ImageID: s.ImageID, ContainerID: s.ContainerID,
				Ready: s.Ready, Started: s.Started, RestartCount: s.RestartCount, State: s.State})
		}
		return out
	}
	pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName, ReadinessGates: pod.Spec.ReadinessGates,
		InitContainers: containers(pod.Spec.InitContainers), Containers: containers(pod.Spec.Containers)}
	var conditions []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == stepwisev1.InPlaceUpdateReady {
			conditions = append(conditions, c)
		}
	}
	pod.Status = corev1.PodStatus{Phase: pod.Status.Phase, Conditions: conditions, Reason: pod.Status.Reason, Message: pod.Status.Message,
		InitContainerStatuses: statuses(pod.Status.InitContainerStatuses), ContainerStatuses: statuses(pod.Status.ContainerStatuses)}
	return pod
}

// TestTrimPodCompactsWithoutChangingValues: the compacted Pod reads the
// same as the plain trim of the same Pod, and its conditions take no more
// room than they need.
func TestTrimPodCompactsWithoutChangingValues(t *testing.T) {
	trim := newTrim()
	in := decodedPod(t, 7)
	want := plainTrim(in)
	if cap(in.Status.Conditions) == len(in.Status.Conditions) {
		t.Fatalf("the decoder left no spare room in %d conditions: the test no longer shows compaction", len(in.Status.Conditions))
	}
	got, err := trim(in)
	if err != nil {
		t.Fatal(err)
	}
	pod := got.(*corev1.Pod)
	if !apiequality.Semantic.DeepEqual(pod, want) {
		gj, _ := json.Marshal(pod)
		wj, _ := json.Marshal(want)
		t.Errorf("trim() =\n  %s\nwant\n  %s", gj, wj)
	}
	if c := pod.Status.Conditions; cap(c) != len(c) {
		t.Errorf("conditions: len %d, cap %d", len(c), cap(c))
	}
	var types []corev1.PodConditionType
	for _, c := range pod.Status.Conditions {
		types = append(types, c.Type)
	}
	if want := []corev1.PodConditionType{stepwisev1.InPlaceUpdateReady, corev1.PodReady}; !reflect.DeepEqual(types, want) {
		t.Errorf("kept conditions %v, want %v (the ones a controller reads, in the Pod's order)", types, want)
	}
}

// TestTrimPodSharesRepeatedStrings: two Pods of one CloneSet, decoded
// apart, hold one copy of the strings they repeat once trimmed. The test
// holds a Handle to each expected string, so that unique keeps it across
// a garbage collection during the test.
func TestTrimPodSharesRepeatedStrings(t *testing.T) {
	trim := newTrim()
	a, b := decodedPod(t, 1), decodedPod(t, 101) // the same node
	fields := map[string]func(p *corev1.Pod) string{
		"namespace":    func(p *corev1.Pod) string { return p.Namespace },
		"generateName": func(p *corev1.Pod) string { return p.GenerateName },
		"label key": func(p *corev1.Pod) string {
			for k := range p.Labels {
				if k == appsv1.ControllerRevisionHashLabelKey {
					return k
				}
			}
			return ""
		},
		"label value": func(p *corev1.Pod) string { return p.Labels[appsv1.ControllerRevisionHashLabelKey] },
		"annotation key": func(p *corev1.Pod) string {
			for k := range p.Annotations {
				return k
			}
			return ""
		},
		"owner apiVersion":      func(p *corev1.Pod) string { return p.OwnerReferences[0].APIVersion },
		"owner kind":            func(p *corev1.Pod) string { return p.OwnerReferences[0].Kind },
		"owner name":            func(p *corev1.Pod) string { return p.OwnerReferences[0].Name },
		"owner uid":             func(p *corev1.Pod) string { return string(p.OwnerReferences[0].UID) },
		"node":                  func(p *corev1.Pod) string { return p.Spec.NodeName },
		"readiness gate":        func(p *corev1.Pod) string { return string(p.Spec.ReadinessGates[0].ConditionType) },
		"container name":        func(p *corev1.Pod) string { return p.Spec.Containers[0].Name },
		"container image":       func(p *corev1.Pod) string { return p.Spec.Containers[0].Image },
		"init container image":  func(p *corev1.Pod) string { return p.Spec.InitContainers[0].Image },
		"phase":                 func(p *corev1.Pod) string { return string(p.Status.Phase) },
		"condition type":        func(p *corev1.Pod) string { return string(p.Status.Conditions[0].Type) },
		"condition status":      func(p *corev1.Pod) string { return string(p.Status.Conditions[0].Status) },
		"container status name": func(p *corev1.Pod) string { return p.Status.ContainerStatuses[0].Name },
		"status image":          func(p *corev1.Pod) string { return p.Status.ContainerStatuses[0].Image },
		"status imageID":        func(p *corev1.Pod) string { return p.Status.ContainerStatuses[0].ImageID },
	}
	handles := map[string]unique.Handle[string]{}
	for name, field := range fields {
		if field(a) == "" || field(a) != field(b) {
			t.Fatalf("%s: %q and %q, want the same non-empty value in both Pods", name, field(a), field(b))
		}
		if unsafe.StringData(field(a)) == unsafe.StringData(field(b)) {
			t.Fatalf("%s: the decoded Pods already share it: the test cannot show interning", name)
		}
		handles[name] = unique.Make(field(a))
	}
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := trim(p); err != nil {
			t.Fatal(err)
		}
	}
	for name, field := range fields {
		if unsafe.StringData(field(a)) != unsafe.StringData(field(b)) {
			t.Errorf("%s: each Pod holds its own copy of %q", name, field(a))
		}
		if unsafe.StringData(field(a)) != unsafe.StringData(handles[name].Value()) {
			t.Errorf("%s: %q is not the interned copy", name, field(a))
		}
	}
	// A Pod's own strings are not interned: they would only add a copy.
	if unsafe.StringData(a.Name) == unsafe.StringData(unique.Make(a.Name).Value()) {
		t.Error("the Pod's name was interned")
	}
}

// The Pods of one revision share one label map, one owner list, one list of
// containers of each kind and one of readiness gates; a Pod whose labels,
// owner or containers differ gets its own, with its own values.
func TestTrimPodSharesLabelSetsAndOwnerLists(t *testing.T) {
	trim := newTrim()
	a, b, c, d := decodedPod(t, 1), decodedPod(t, 2), decodedPod(t, 3), decodedPod(t, 4)
	c.Labels[stepwisev1.LifecycleStateLabel] = stepwisev1.LifecycleStateUpdating
	d.OwnerReferences[0].BlockOwnerDeletion = ptr.To(false)
	c.Spec.Containers[0].Image = "registry.example.com/shop/web:2.15.0"
	d.Spec.InitContainers[0].RestartPolicy = nil
	want := map[*corev1.Pod]*corev1.Pod{}
	for _, p := range []*corev1.Pod{a, b, c, d} {
		want[p] = p.DeepCopy()
		if _, err := trim(p); err != nil {
			t.Fatal(err)
		}
	}
	same := func(x, y map[string]string) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if !same(a.Labels, b.Labels) || !same(a.Labels, d.Labels) {
		t.Error("Pods with equal labels hold their own maps")
	}
	if same(a.Labels, c.Labels) {
		t.Error("a Pod with another lifecycle state got the map of the others' labels")
	}
	if &a.OwnerReferences[0] != &b.OwnerReferences[0] || &a.OwnerReferences[0] != &c.OwnerReferences[0] {
		t.Error("Pods with the same owner hold their own owner lists")
	}
	if &a.OwnerReferences[0] == &d.OwnerReferences[0] {
		t.Error("a Pod whose owner reference differs got the others' list")
	}
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] || &a.Spec.Containers[0] != &d.Spec.Containers[0] {
		t.Error("Pods with the same containers hold their own container lists")
	}
	if &a.Spec.Containers[0] == &c.Spec.Containers[0] {
		t.Error("a Pod on another image got the others' container list")
	}
	if &a.Spec.InitContainers[0] != &c.Spec.InitContainers[0] || &a.Spec.InitContainers[0] == &d.Spec.InitContainers[0] {
		t.Error("init containers: shared by the Pods whose sidecar is the same, or not kept apart from the one without a restart policy")
	}
	if &a.Spec.ReadinessGates[0] != &d.Spec.ReadinessGates[0] {
		t.Error("Pods with the same readiness gates hold their own lists")
	}
	for p, before := range want {
		if !apiequality.Semantic.DeepEqual(p.Labels, before.Labels) || !apiequality.Semantic.DeepEqual(p.OwnerReferences, before.OwnerReferences) {
			t.Errorf("pod %s: labels %v owners %v, want %v %v", p.Name, p.Labels, p.OwnerReferences, before.Labels, before.OwnerReferences)
		}
		kept := plainTrim(before)
		if !apiequality.Semantic.DeepEqual(p.Spec, kept.Spec) {
			t.Errorf("pod %s: spec %+v, want %+v", p.Name, p.Spec, kept.Spec)
		}
	}
}

// A table that reached its bound starts again: the Pods trimmed before
// keep their maps and values, later Pods share new ones.
func TestPodMetaTableStartsAgainWhenFull(t *testing.T) {
	table := newPodMetaTable()
	first := table.labelSet(map[string]string{"app": "web", "n": "0"})
	for i := 1; i < maxPodMetaEntries; i++ {
		table.labelSet(map[string]string{"app": "web", "n": strconv.Itoa(i)})
	}
	if got := table.labelSet(map[string]string{"app": "web", "n": "0"}); reflect.ValueOf(got).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
		t.Fatal("a set already in the table got a new map")
	}
	table.labelSet(map[string]string{"app": "web", "n": "full"})
	if n := len(table.labels); n != 1 {
		t.Errorf("the full table holds %d sets after one more, want 1 (started again)", n)
	}
	if first["n"] != "0" || len(first) != 2 {
		t.Errorf("a map handed out before the table started again changed: %v", first)
	}
}
