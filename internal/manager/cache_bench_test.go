package manager

import (
	"fmt"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// servedPod is CloneSet Pod i as the apiserver serves it once the kubelet
// has reported it running: what the informer decodes, before trim.
func servedPod(i int) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	name := fmt.Sprintf("web-7c9d8-%05d", i)
	started := metav1.Unix(1_780_000_100, 0)
	running := func() corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
	}
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus, reason string, at int64) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, ObservedGeneration: 1, LastTransitionTime: metav1.Unix(at, 0)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop-frontend", Name: name, GenerateName: "web-7c9d8-",
			UID:               types.UID(fmt.Sprintf("8f1c2d3e-4b5a-4c6d-9e7f-%012d", i)),
			ResourceVersion:   fmt.Sprint(1_000_000 + i),
			Generation:        1,
			CreationTimestamp: metav1.Unix(1_780_000_000, 0),
			Labels: map[string]string{
				"app":                                 "web",
				appsv1.ControllerRevisionHashLabelKey: "web-7c9d8f6b54",
				stepwisev1.RevisionHashLabel:          "7c9d8f6b54",
				stepwisev1.LifecycleStateLabel:        stepwisev1.LifecycleStateNormal,
			},
			Annotations: map[string]string{
				stepwisev1.InPlaceUpdateStateAnnotation: fmt.Sprintf(`{"revision":"web-7c9d8f6b54","updateTimestamp":"2026-06-01T10:%02d:%02dZ",`+
					`"lastContainerStatuses":{"app":{"imageID":"registry.example.com/shop/web@sha256:4f2a9c1d7e3b5a6c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"}},`+
					`"containerBatchesRecord":[{"containers":["app"]}]}`, i/60%60, i%60),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web",
				UID: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "stepwise-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: ptr.To(metav1.Unix(1_780_000_000, 0)), FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:controller-revision-hash":{}},"f:ownerReferences":{}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}`),
			}, {
				Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
				Time: ptr.To(metav1.Unix(1_780_000_100, 0)), FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{},"f:startTime":{}}}`),
			}},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "proxy", Image: "registry.example.com/mesh/proxy:1.22.3", RestartPolicy: &always,
				Args: []string{"--listen=:15001"}, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/web:2.14.1", Args: []string{"--serve", "--port=8080"},
				Ports:                    []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:                      []corev1.EnvVar{{Name: "MODE", Value: "serve"}, {Name: "LOG_LEVEL", Value: "info"}},
				VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				ReadinessProbe:           &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}, PeriodSeconds: 10},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			Volumes:                       []corev1.Volume{{Name: "kube-api-access-x7k2p"}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			NodeName:                      fmt.Sprintf("worker-%03d", i%100),
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
			},
			ReadinessGates:     []corev1.PodReadinessGate{{ConditionType: stepwisev1.InPlaceUpdateReady}},
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				cond(stepwisev1.InPlaceUpdateReady, corev1.ConditionTrue, "", 1_780_000_001),
				cond(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", 1_780_000_050),
				cond(corev1.PodInitialized, corev1.ConditionTrue, "", 1_780_000_060),
				cond(corev1.PodReady, corev1.ConditionTrue, "", 1_780_000_110),
				cond(corev1.ContainersReady, corev1.ConditionTrue, "", 1_780_000_110),
				cond(corev1.PodScheduled, corev1.ConditionTrue, "", 1_780_000_000),
			},
			HostIP:    fmt.Sprintf("10.0.%d.%d", i/250%250, i%250+1),
			HostIPs:   []corev1.HostIP{{IP: fmt.Sprintf("10.0.%d.%d", i/250%250, i%250+1)}},
			PodIP:     fmt.Sprintf("10.244.%d.%d", i/250%250, i%250+1),
			PodIPs:    []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i/250%250, i%250+1)}},
			StartTime: ptr.To(metav1.Unix(1_780_000_000, 0)),
			QOSClass:  corev1.PodQOSBestEffort,
			InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "proxy", Image: "registry.example.com/mesh/proxy:1.22.3",
				ImageID:     "registry.example.com/mesh/proxy@sha256:9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b",
				ContainerID: fmt.Sprintf("containerd://%064x", 2*i),
				Ready:       true, Started: ptr.To(true), State: running(),
			}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Image: "registry.example.com/shop/web:2.14.1",
				ImageID:     "registry.example.com/shop/web@sha256:4f2a9c1d7e3b5a6c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c",
				ContainerID: fmt.Sprintf("containerd://%064x", 2*i+1),
				Ready:       true, Started: ptr.To(true), State: running(),
				VolumeMounts: []corev1.VolumeMountStatus{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
		},
	}
}

// BenchmarkCachedPodBytes measures the heap a cached Pod keeps: Pods of
// one CloneSet are decoded from protobuf, as the informer gets them, then
// trimmed, and kept; the heap growth after a collection, divided by the
// number of Pods, is reported as B/pod.
//
//	go test ./internal/manager/ -run '^$' -bench CachedPodBytes -benchtime 5x
func BenchmarkCachedPodBytes(b *testing.B) {
	trim := newTrim()
	const pods = 1000
	wire := make([][]byte, pods)
	for i := range wire {
		raw, err := servedPod(i).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = raw
	}
	var total float64
	runs := 0
	for b.Loop() {
		runs++
		kept := make([]any, pods)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i, raw := range wire {
			pod := &corev1.Pod{}
			if err := pod.Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
			out, err := trim(pod)
			if err != nil {
				b.Fatal(err)
			}
			kept[i] = out
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		total += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(kept)
	}
	b.ReportMetric(total/float64(runs)/pods, "B/pod")
}

// BenchmarkDecodeAndTrimPod measures the CPU the informer spends on one
// Pod event: decoding it from protobuf and trimming it.
//
//	go test ./internal/manager/ -run '^$' -bench DecodeAndTrimPod
func BenchmarkDecodeAndTrimPod(b *testing.B) {
	trim := newTrim()
	raw, err := servedPod(1).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		pod := &corev1.Pod{}
		if err := pod.Unmarshal(raw); err != nil {
			b.Fatal(err)
		}
		if _, err := trim(pod); err != nil {
			b.Fatal(err)
		}
	}
}
