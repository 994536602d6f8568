package podcache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Record is what the cache keeps of a Pod: its metadata, and of its spec
// and status the fields a controller reads (internal/manager's trimPod
// says which). Its fields are the Pod's, under the same names.
//
// Records are shared by every reader of the cache: nothing may write into
// one, nor into the maps and slices of a Pod made from one (Pod).
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type Record struct {
	metav1.ObjectMeta

	// Of the spec.
	NodeName       string
	ReadinessGates []corev1.PodReadinessGate
	InitContainers []corev1.Container
	Containers     []corev1.Container

	// Of the status.
	Phase                 corev1.PodPhase
	Reason                string
	Message               string
	Conditions            []corev1.PodCondition
	InitContainerStatuses []corev1.ContainerStatus
	ContainerStatuses     []corev1.ContainerStatus
}

// GetObjectKind is empty: a Record is never encoded, and the informer
// that holds it knows it holds Pods.
func (r *Record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// NewRecord keeps pod's metadata and the fields of its spec and status
// that a Record holds, sharing their maps and slices with pod: the cache
// transform hands over a Pod it has just trimmed and no longer uses.
func NewRecord(pod *corev1.Pod) *Record {
	return &Record{
		ObjectMeta:            pod.ObjectMeta,
		NodeName:              pod.Spec.NodeName,
		ReadinessGates:        pod.Spec.ReadinessGates,
		InitContainers:        pod.Spec.InitContainers,
		Containers:            pod.Spec.Containers,
		Phase:                 pod.Status.Phase,
		Reason:                pod.Status.Reason,
		Message:               pod.Status.Message,
		Conditions:            pod.Status.Conditions,
		InitContainerStatuses: pod.Status.InitContainerStatuses,
		ContainerStatuses:     pod.Status.ContainerStatuses,
	}
}

// Pod is the Pod the record keeps, as a *corev1.Pod for the controllers'
// code. It shares the record's maps and slices, so it is as read-only as
// the record: a controller that changes a Pod changes a DeepCopy of it, as
// it always did with Pods read from the cache.
func (r *Record) Pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: r.ObjectMeta,
		Spec: corev1.PodSpec{
			NodeName:       r.NodeName,
			ReadinessGates: r.ReadinessGates,
			InitContainers: r.InitContainers,
			Containers:     r.Containers,
		},
		Status: corev1.PodStatus{
			Phase:                 r.Phase,
			Reason:                r.Reason,
			Message:               r.Message,
			Conditions:            r.Conditions,
			InitContainerStatuses: r.InitContainerStatuses,
			ContainerStatuses:     r.ContainerStatuses,
		},
	}
}
