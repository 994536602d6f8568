package manager

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"unique"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestPodSelector(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{name: "CloneSet, StatefulSet or OpenKruise Pod", labels: map[string]string{"app": "web", "controller-revision-hash": "web-1"}, want: true},
		{name: "empty revision value still counts", labels: map[string]string{"controller-revision-hash": ""}, want: true},
		{name: "Deployment Pod", labels: map[string]string{"app": "web", "pod-template-hash": "5d8f"}},
		{name: "bare Pod", labels: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodSelector().Matches(labels.Set(tt.labels)); got != tt.want {
				t.Errorf("PodSelector() matches %v = %v, want %v", tt.labels, got, tt.want)
			}
		})
	}
}

// The Job cache holds only the Jobs job metrics create: a cluster's other
// Jobs (CronJobs' history, often thousands) stay out of memory.
func TestAnalysisJobSelector(t *testing.T) {
	if !AnalysisJobSelector().Matches(labels.Set{stepwisev1.AnalysisRolloutLabel: "web", stepwisev1.AnalysisMetricLabel: "smoke"}) {
		t.Error("an analysis Job is not cached")
	}
	if AnalysisJobSelector().Matches(labels.Set{"batch.kubernetes.io/job-name": "backup-29000000"}) {
		t.Error("another Job is cached")
	}
	for obj, by := range cacheOptions(nil, nil).ByObject {
		if _, ok := obj.(*batchv1.Job); ok {
			if by.Label.String() != AnalysisJobSelector().String() {
				t.Errorf("the Job cache selects %q, want %q", by.Label, AnalysisJobSelector())
			}
			return
		}
	}
	t.Error("the cache options do not limit Jobs")
}

// richSpec is a Pod spec with much that no controller reads.
func richSpec() corev1.PodSpec {
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1", Command: []string{"sh", "-c", "true"}}},
		Containers: []corev1.Container{{
			Name: "app", Image: "web:1.0.0", Args: []string{"--serve"},
			Env:       []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{},
		}},
		Volumes:            []corev1.Volume{{Name: "data"}},
		ServiceAccountName: "web",
	}
}

// richPod is a Pod as the kubelet reports it, with an init sidecar.
func richPod() *corev1.Pod {
	spec := richSpec()
	always := corev1.ContainerRestartPolicyAlways
	spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: "proxy", Image: "proxy:1", RestartPolicy: &always, Args: []string{"--listen"}})
	spec.NodeName = "node-1"
	spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: stepwisev1.InPlaceUpdateReady}}
	spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}}
	started := true
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(100, 0)}}
	meta := sampleMeta("web-0")
	meta.Annotations[stepwisev1.InPlaceUpdateStateAnnotation] = `{"revision":"web-2"}`
	meta.OwnerReferences = controlledBy("stepwise.dev/v1alpha1", "CloneSet", "web")
	return &corev1.Pod{ObjectMeta: meta, Spec: spec, Status: corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(200, 0)}},
		HostIP:     "10.0.0.1", PodIP: "10.244.0.5", PodIPs: []corev1.PodIP{{IP: "10.244.0.5"}},
		StartTime: ptr.To(metav1.Unix(90, 0)), QOSClass: corev1.PodQOSBestEffort,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "web:1.0.0", ImageID: "sha256:aa", ContainerID: "containerd://1",
			Ready: true, Started: &started, RestartCount: 2, State: running,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}},
			VolumeMounts:         []corev1.VolumeMountStatus{{Name: "data", MountPath: "/data"}},
		}},
	}}
}

// keptPod is richPod as the cache keeps it.
func keptPod() *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	started := true
	meta := keptMeta("web-0")
	meta.Annotations[stepwisev1.InPlaceUpdateStateAnnotation] = `{"revision":"web-2"}`
	meta.OwnerReferences = controlledBy("stepwise.dev/v1alpha1", "CloneSet", "web")
	return &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
		NodeName:       "node-1",
		ReadinessGates: []corev1.PodReadinessGate{{ConditionType: stepwisev1.InPlaceUpdateReady}},
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1"}, {Name: "proxy", Image: "proxy:1", RestartPolicy: &always}},
		Containers:     []corev1.Container{{Name: "app", Image: "web:1.0.0"}},
	}, Status: corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(200, 0)}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "web:1.0.0", ImageID: "sha256:aa", ContainerID: "containerd://1",
			Ready: true, Started: &started, RestartCount: 2,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(100, 0)}},
		}},
	}}
}

func sampleMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 3, ResourceVersion: "42",
		Labels:        map[string]string{"app": "web"},
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"huge":"json"}`, "team": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}
}

// keptMeta is sampleMeta as the cache keeps it.
func keptMeta(name string) metav1.ObjectMeta {
	m := sampleMeta(name)
	m.ManagedFields = nil
	m.Annotations = map[string]string{"team": "a"}
	return m
}

func controlledBy(apiVersion, kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: "owner", Controller: ptr.To(true)}}
}

func templatePatch(t *testing.T, spec corev1.PodSpec) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"labels": map[string]string{"app": "web"}},
		"spec":     spec,
		"$patch":   "replace",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestTrim(t *testing.T) {
	trim := newTrim()
	status := appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 4, ReadyReplicas: 3, UpdatedReplicas: 2, UpdateRevision: "web-2", CurrentRevision: "web-1"}
	strategy := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(2))}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	imagesOnly := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1"}},
		Containers:     []corev1.Container{{Name: "app", Image: "web:1.0.0"}},
	}
	cloneSetTemplate, err := json.Marshal(corev1.PodTemplateSpec{Spec: richSpec()})
	if err != nil {
		t.Fatal(err)
	}
	slimPatch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"initContainers": []map[string]string{{"name": "init", "image": "busybox:1"}},
		"containers":     []map[string]string{{"name": "app", "image": "web:1.0.0"}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}

	revision := func(owner []metav1.OwnerReference, raw []byte) *appsv1.ControllerRevision {
		m := sampleMeta("web-2")
		m.OwnerReferences = owner
		return &appsv1.ControllerRevision{ObjectMeta: m, Revision: 2, Data: runtime.RawExtension{Raw: raw}}
	}
	keptRevision := func(owner []metav1.OwnerReference, raw []byte) *appsv1.ControllerRevision {
		r := revision(owner, raw)
		r.ObjectMeta = keptMeta("web-2")
		r.OwnerReferences = owner
		return r
	}

	tests := []struct {
		name string
		in   runtime.Object
		want runtime.Object
	}{{
		name: "a Pod keeps its metadata, and of spec and status what the controllers read",
		in:   richPod(),
		want: keptPod(),
	}, {
		name: "a Stepwise CloneSet is kept whole but for managedFields and last-applied",
		in:   &stepwisev1.CloneSet{ObjectMeta: sampleMeta("web"), Spec: stepwisev1.CloneSetSpec{Selector: selector, Template: corev1.PodTemplateSpec{Spec: richSpec()}}},
		want: &stepwisev1.CloneSet{ObjectMeta: keptMeta("web"), Spec: stepwisev1.CloneSetSpec{Selector: selector, Template: corev1.PodTemplateSpec{Spec: richSpec()}}},
	}, {
		name: "a StatefulSet keeps what the Rollout observes",
		in: &appsv1.StatefulSet{ObjectMeta: sampleMeta("web"), Status: status, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(4)), Selector: selector, UpdateStrategy: strategy, ServiceName: "web",
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: richSpec()},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		}},
		want: &appsv1.StatefulSet{ObjectMeta: keptMeta("web"), Status: status, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(4)), Selector: selector, UpdateStrategy: strategy, ServiceName: "web",
			Template: corev1.PodTemplateSpec{Spec: imagesOnly},
		}},
	}, {
		name: "a Stepwise CloneSet's revision is kept whole",
		in:   revision(controlledBy("stepwise.dev/v1alpha1", "CloneSet", "web"), cloneSetTemplate),
		want: keptRevision(controlledBy("stepwise.dev/v1alpha1", "CloneSet", "web"), cloneSetTemplate),
	}, {
		name: "a StatefulSet's revision keeps its images",
		in:   revision(controlledBy("apps/v1", "StatefulSet", "web"), templatePatch(t, richSpec())),
		want: keptRevision(controlledBy("apps/v1", "StatefulSet", "web"), slimPatch),
	}, {
		name: "an OpenKruise CloneSet's revision keeps its images",
		in:   revision(controlledBy("apps.kruise.io/v1alpha1", "CloneSet", "web"), templatePatch(t, richSpec())),
		want: keptRevision(controlledBy("apps.kruise.io/v1alpha1", "CloneSet", "web"), slimPatch),
	}, {
		name: "a StatefulSet's revision that does not decode is kept",
		in:   revision(controlledBy("apps/v1", "StatefulSet", "web"), []byte(`"not a patch"`)),
		want: keptRevision(controlledBy("apps/v1", "StatefulSet", "web"), []byte(`"not a patch"`)),
	}, {
		name: "a DaemonSet's revision loses its data",
		in:   revision(controlledBy("apps/v1", "DaemonSet", "agent"), templatePatch(t, richSpec())),
		want: keptRevision(controlledBy("apps/v1", "DaemonSet", "agent"), nil),
	}, {
		name: "a revision without a controller is kept whole",
		in:   revision(nil, cloneSetTemplate),
		want: keptRevision(nil, cloneSetTemplate),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := trim(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			normalizeData(t, got)
			normalizeData(t, tt.want)
			if !apiequality.Semantic.DeepEqual(got, tt.want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(tt.want)
				t.Errorf("trim() =\n  %s\nwant\n  %s", gj, wj)
			}
			// Transforms may run again on what they returned.
			again, _ := trim(got)
			normalizeData(t, again)
			if !apiequality.Semantic.DeepEqual(again, tt.want) {
				t.Error("trim is not idempotent")
			}
		})
	}
}

// normalizeData re-encodes a revision's data with sorted keys, so that
// equal JSON compares equal.
func normalizeData(t *testing.T, obj any) {
	t.Helper()
	rev, ok := obj.(*appsv1.ControllerRevision)
	if !ok || rev.Data.Raw == nil {
		return
	}
	var v any
	if err := json.Unmarshal(rev.Data.Raw, &v); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	rev.Data.Raw = raw
}

func TestTrimKruiseCloneSet(t *testing.T) {
	trim := newTrim()
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1",
		"kind":       "CloneSet",
		"metadata": map[string]any{
			"namespace": "ns", "name": "web", "uid": "u", "generation": int64(3),
			"annotations":   map[string]any{corev1.LastAppliedConfigAnnotation: "{}", "team": "a"},
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
		},
		"spec": map[string]any{
			"replicas":       int64(4),
			"selector":       map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"updateStrategy": map[string]any{"partition": "50%", "type": "InPlaceIfPossible", "maxUnavailable": "20%"},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{
					"containers":     []any{map[string]any{"name": "app", "image": "web:2.0.0", "env": []any{map[string]any{"name": "A"}}}},
					"initContainers": []any{map[string]any{"name": "init", "image": "busybox:1", "command": []any{"true"}}},
					"volumes":        []any{map[string]any{"name": "data"}},
				},
			},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "data"}}},
			"scaleStrategy":        map[string]any{"podsToDelete": []any{"web-x"}},
		},
		"status": map[string]any{"observedGeneration": int64(3), "updatedReadyReplicas": int64(2), "updateRevision": "web-2", "currentRevision": "web-1"},
	}}
	want := map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1",
		"kind":       "CloneSet",
		"metadata": map[string]any{
			"namespace": "ns", "name": "web", "uid": "u", "generation": int64(3),
			"annotations": map[string]any{"team": "a"},
		},
		"spec": map[string]any{
			"replicas":       int64(4),
			"selector":       map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"updateStrategy": map[string]any{"partition": "50%", "type": "InPlaceIfPossible", "maxUnavailable": "20%"},
			"template": map[string]any{"spec": map[string]any{
				"containers":     []any{map[string]any{"name": "app", "image": "web:2.0.0"}},
				"initContainers": []any{map[string]any{"name": "init", "image": "busybox:1"}},
			}},
		},
		"status": map[string]any{"observedGeneration": int64(3), "updatedReadyReplicas": int64(2), "updateRevision": "web-2", "currentRevision": "web-1"},
	}
	other := in.DeepCopy()
	got, err := trim(in)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got.(*unstructured.Unstructured).Object, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Errorf("trim() =\n  %s\nwant\n  %s", gj, wj)
	}

	// Another group's CloneSet is not ours to read: only the common trim.
	other.SetAPIVersion("apps.example.com/v1")
	got, _ = trim(other)
	if _, ok := got.(*unstructured.Unstructured).Object["spec"].(map[string]any)["volumeClaimTemplates"]; !ok {
		t.Error("trim cut the spec of a kind it does not know")
	}
}

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
