package manager

import (
	"encoding/json"
	"testing"

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
