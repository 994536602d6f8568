package inplace

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// fakePods is a map-backed PodClient that behaves like the API server where
// the engine's write sequence depends on it: optimistic concurrency on
// resourceVersion, spec immutable except images, status writes ignoring
// metadata and spec, and a JSON round trip (times lose sub-seconds). It
// records the engine's writes; kubelet's writes are not recorded.
//
// It exists to count and inspect the engine's writes. Controller behaviour
// is tested against a real API server elsewhere.
type fakePods struct {
	t      *testing.T
	pods   map[string]*corev1.Pod
	rv     int
	writes []write
	// failNextUpdate, when set, fails the next Update (not UpdateStatus)
	// with this error, as if the controller crashed before writing.
	failNextUpdate error
	// raceNextWrite, when set, bumps the stored Pod's resourceVersion just
	// before the next engine write, as a concurrent kubelet status update.
	raceNextWrite bool
}

type write struct {
	status bool // true: UpdateStatus; false: Update
	pod    *corev1.Pod
}

func newFakePods(t *testing.T, pods ...*corev1.Pod) *fakePods {
	f := &fakePods{t: t, pods: map[string]*corev1.Pod{}}
	for _, p := range pods {
		f.store(p.DeepCopy())
	}
	return f
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// store saves a JSON round trip of pod with a new resourceVersion.
func (f *fakePods) store(pod *corev1.Pod) *corev1.Pod {
	f.rv++
	pod.ResourceVersion = strconv.Itoa(f.rv)
	raw, err := json.Marshal(pod)
	if err != nil {
		f.t.Fatalf("encode pod: %v", err)
	}
	stored := &corev1.Pod{}
	if err := json.Unmarshal(raw, stored); err != nil {
		f.t.Fatalf("decode pod: %v", err)
	}
	f.pods[podKey(pod.Namespace, pod.Name)] = stored
	return stored.DeepCopy()
}

func (f *fakePods) get(name string) *corev1.Pod {
	p, ok := f.pods[podKey("ns", name)]
	if !ok {
		f.t.Fatalf("pod %s not found", name)
	}
	return p.DeepCopy()
}

func (f *fakePods) GetFresh(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p, ok := f.pods[podKey(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	return p.DeepCopy(), nil
}

func (f *fakePods) checkVersion(pod *corev1.Pod) (*corev1.Pod, error) {
	stored, ok := f.pods[podKey(pod.Namespace, pod.Name)]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod.Name)
	}
	if f.raceNextWrite {
		f.raceNextWrite = false
		stored = f.store(stored.DeepCopy())
	}
	if pod.ResourceVersion != stored.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, pod.Name, fmt.Errorf("resourceVersion %s is stale", pod.ResourceVersion))
	}
	return stored, nil
}

// Patch applies modified's metadata and spec; with optimisticLock it is
// refused when the Pod changed since original was read.
func (f *fakePods) Patch(_ context.Context, original, pod *corev1.Pod, optimisticLock bool) error {
	if err := f.failNextUpdate; err != nil {
		f.failNextUpdate = nil
		return err
	}
	stored := f.get(pod.Name)
	if stored == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod.Name)
	}
	if optimisticLock {
		var err error
		if stored, err = f.checkVersion(original); err != nil {
			return err
		}
	}
	if immutableChange(stored, pod) {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, nil)
	}
	next := stored.DeepCopy()
	next.ObjectMeta = *pod.ObjectMeta.DeepCopy()
	next.Spec = *pod.Spec.DeepCopy()
	*pod = *f.store(next)
	f.writes = append(f.writes, write{pod: pod.DeepCopy()})
	return nil
}

// PatchConditions merges conditions by type, as a strategic merge patch
// does: no resourceVersion check, other status fields untouched; labels
// merge into the stored ones, as pods/status allows.
func (f *fakePods) PatchConditions(_ context.Context, pod *corev1.Pod, conditions []corev1.PodCondition, labels map[string]string) error {
	stored := f.get(pod.Name)
	if stored == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod.Name)
	}
	next := stored.DeepCopy()
	for k, v := range labels {
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		next.Labels[k] = v
	}
	for _, condition := range conditions {
		replaced := false
		for i := range next.Status.Conditions {
			if next.Status.Conditions[i].Type == condition.Type {
				next.Status.Conditions[i] = condition
				replaced = true
			}
		}
		if !replaced {
			next.Status.Conditions = append(next.Status.Conditions, condition)
		}
	}
	*pod = *f.store(next)
	f.writes = append(f.writes, write{status: true, pod: pod.DeepCopy()})
	return nil
}

// immutableChange reports whether the update changes the Pod spec in
// anything but images, which the API server refuses.
func immutableChange(oldPod, newPod *corev1.Pod) bool {
	a, b := oldPod.Spec.DeepCopy(), newPod.Spec.DeepCopy()
	for _, s := range []*corev1.PodSpec{a, b} {
		for i := range s.Containers {
			s.Containers[i].Image = ""
		}
		for i := range s.InitContainers {
			s.InitContainers[i].Image = ""
		}
	}
	return !apiequality.Semantic.DeepEqual(a, b)
}

// kubeletRestart plays kubelet: every container whose running image differs
// from its spec restarts on the spec image. imageID gives the new imageID
// (a retag keeps the old one); ready says whether it passes readiness.
func (f *fakePods) kubeletRestart(name string, ready bool, imageID func(old, image string) string) {
	pod := f.get(name)
	for _, c := range pod.Spec.Containers {
		st := findStatus(pod, c.Name, false)
		if st.Image == c.Image {
			continue
		}
		st.Image, st.ImageID = c.Image, imageID(st.ImageID, c.Image)
		st.Ready, st.RestartCount = ready, st.RestartCount+1
		st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	f.store(pod)
}

// kubeletReady marks a container ready.
func (f *fakePods) kubeletReady(name, container string) {
	pod := f.get(name)
	findStatus(pod, container, false).Ready = true
	f.store(pod)
}

// kubeletSync writes Ready as a kubelet computes it: every container ready
// and every readiness gate's condition True. Tests call it where a kubelet
// would have reacted to a gate the engine flipped.
func (f *fakePods) kubeletSync(name string) {
	pod := f.get(name)
	ready := corev1.ConditionTrue
	for _, st := range pod.Status.ContainerStatuses {
		if !st.Ready {
			ready = corev1.ConditionFalse
		}
	}
	for _, gate := range pod.Spec.ReadinessGates {
		status := corev1.ConditionFalse
		for _, c := range pod.Status.Conditions {
			if c.Type == gate.ConditionType {
				status = c.Status
			}
		}
		if status != corev1.ConditionTrue {
			ready = corev1.ConditionFalse
		}
	}
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady && c.Status != ready {
			c.Status = ready
			f.store(pod)
		}
	}
}

func newImageID(_, image string) string { return "id-of-" + image }
func sameImageID(old, _ string) string  { return old }

// imagePatches counts the engine's spec writes that changed the image of
// container, starting from initial. Each is one restart by kubelet.
func (f *fakePods) imagePatches(initial *corev1.Pod, name string) int {
	c, _ := findContainer(initial, name)
	last, n := c.Image, 0
	for _, w := range f.writes {
		if w.status {
			continue
		}
		if c, _ := findContainer(w.pod, name); c.Image != last {
			last = c.Image
			n++
		}
	}
	return n
}

func (f *fakePods) countWrites() (status, spec int) {
	for _, w := range f.writes {
		if w.status {
			status++
		} else {
			spec++
		}
	}
	return status, spec
}

// newPod returns a running, ready Pod of web at revision "r1", with the
// readiness gate and InPlaceUpdateReady True. Each container runs its spec
// image.
func newPod(containers ...corev1.Container) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web-0",
			Labels: map[string]string{"app": "web", "controller-revision-hash": "r1"},
		},
		Spec: corev1.PodSpec{
			Containers:     containers,
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: podConditionType}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: podConditionType, Status: corev1.ConditionTrue, Reason: ConditionReasonNotUpdating},
			},
		},
	}
	for _, c := range containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: newImageID("", c.Image), Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
	return pod
}

func container(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image}
}

func template(containers ...corev1.Container) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newEngine(t *testing.T, pods ...*corev1.Pod) (*Engine, *fakePods, *clocktesting.FakePassiveClock) {
	f := newFakePods(t, pods...)
	clk := clocktesting.NewFakePassiveClock(epoch)
	return New(f, clk), f, clk
}

func conditionOf(t *testing.T, pod *corev1.Pod) corev1.PodCondition {
	t.Helper()
	c := getCondition(pod)
	if c == nil {
		t.Fatalf("pod has no %s condition", v1alpha1.InPlaceUpdateReady)
	}
	return *c
}

func imageOf(t *testing.T, pod *corev1.Pod, name string) string {
	t.Helper()
	c, _ := findContainer(pod, name)
	if c == nil {
		t.Fatalf("pod has no container %s", name)
	}
	return c.Image
}
