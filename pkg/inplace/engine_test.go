package inplace

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// These tests replay whole in-place updates of one Pod against fakePods and
// check the write budget and the resume guarantees of the contract.

func specFor(t *testing.T, revision string, oldT, newT *corev1.PodTemplateSpec) *UpdateSpec {
	t.Helper()
	spec, err := CalculateSpec(oldT, newT)
	if err != nil {
		t.Fatalf("CalculateSpec: %v", err)
	}
	spec.Revision = revision
	return spec
}

func update(t *testing.T, e *Engine, f *fakePods, spec *UpdateSpec, opts UpdateOptions) UpdateResult {
	t.Helper()
	res := e.Update(context.Background(), f.get("web-0"), spec, opts)
	if res.Err != nil {
		t.Fatalf("Update: %v", res.Err)
	}
	if !res.InPlace {
		t.Fatalf("Update: InPlace = false")
	}
	return res
}

// refresh calls Refresh with the Pod as stored, as a fresh cache would hold it.
func refresh(t *testing.T, e *Engine, f *fakePods) RefreshResult {
	t.Helper()
	return refreshWith(t, e, f.get("web-0"))
}

func refreshWith(t *testing.T, e *Engine, pod *corev1.Pod) RefreshResult {
	t.Helper()
	res := e.Refresh(context.Background(), pod)
	if res.Err != nil {
		t.Fatalf("Refresh: %v", res.Err)
	}
	return res
}

func expectWrites(t *testing.T, f *fakePods, wantStatus, wantSpec int) {
	t.Helper()
	status, spec := f.countWrites()
	if status != wantStatus || spec != wantSpec {
		t.Fatalf("writes: %d status + %d spec, want %d + %d", status, spec, wantStatus, wantSpec)
	}
}

func expectPhase(t *testing.T, res RefreshResult, want Phase) {
	t.Helper()
	if res.Phase != want {
		t.Fatalf("Refresh phase = %s, want %s", res.Phase, want)
	}
}

func TestEngine_PlainImageUpdateTakesThreeWrites(t *testing.T) {
	oldT := template(container("app", "nginx:1.25"))
	newT := template(container("app", "nginx:1.26"))
	e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))

	res := update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{})
	if res.Delay != 0 || res.Pod == nil {
		t.Fatalf("Update result = %+v, want no delay and the written pod", res)
	}
	expectWrites(t, f, 1, 1)
	if !f.writes[0].status || conditionOf(t, f.writes[0].pod).Status != corev1.ConditionFalse {
		t.Fatalf("first write must take the pod out of service, got %+v", f.writes[0])
	}
	// Ready=False in that same write, not when the kubelet catches up: an
	// EndpointSlice must not keep the Pod a ready endpoint meanwhile.
	if got := podReady(f.writes[0].pod); got != corev1.ConditionFalse {
		t.Fatalf("first write: Ready = %q, want False written with the gate", got)
	}
	pod := f.get("web-0")
	if got := imageOf(t, pod, "app"); got != "nginx:1.26" {
		t.Fatalf("app image = %s, want nginx:1.26", got)
	}
	if pod.Labels["controller-revision-hash"] != "r2" {
		t.Fatalf("revision label = %q, want r2", pod.Labels["controller-revision-hash"])
	}
	state, err := ParseState(pod)
	if err != nil || state.Revision != "r2" || state.LastContainerStatuses["app"].ImageID != "id-of-nginx:1.25" {
		t.Fatalf("state = %+v, %v; want revision r2 and the old imageID recorded", state, err)
	}
	if !IsUpdating(pod) || Ready(pod) {
		t.Fatalf("pod mid-update: IsUpdating=%v Ready=%v, want true/false", IsUpdating(pod), Ready(pod))
	}

	// Kubelet has not restarted the container yet: nothing to write.
	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	expectWrites(t, f, 1, 1)

	f.kubeletRestart("web-0", true, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
	expectWrites(t, f, 2, 1)
	pod = f.get("web-0")
	if c := conditionOf(t, pod); c.Status != corev1.ConditionTrue || c.Reason != ConditionReasonCompleted {
		t.Fatalf("condition = %+v, want True/%s", c, ConditionReasonCompleted)
	}
	// The engine wrote Ready=False with the gate, and never writes
	// Ready=True: only the kubelet knows the containers serve again.
	if got := podReady(pod); got != corev1.ConditionFalse {
		t.Fatalf("Ready = %q after the engine's last write, want False until the kubelet syncs", got)
	}
	f.kubeletSync("web-0") // the gate is True: the kubelet says Ready again
	pod = f.get("web-0")
	if IsUpdating(pod) || !Ready(pod) {
		t.Fatalf("pod after update: IsUpdating=%v Ready=%v, want false/true", IsUpdating(pod), Ready(pod))
	}

	// Steady state: Refresh writes nothing more.
	expectPhase(t, refresh(t, e, f), PhaseIdle)
	expectWrites(t, f, 2, 1)
	if n := f.imagePatches(newPod(oldT.Spec.Containers...), "app"); n != 1 {
		t.Fatalf("app image patched %d times, want 1", n)
	}
}

func TestEngine_MetadataOnlyTakesOneWrite(t *testing.T) {
	oldT := template(container("app", "nginx:1.25"))
	newT := oldT.DeepCopy()
	newT.Labels["tier"] = "front"
	newT.Annotations = map[string]string{"note": "x"}
	e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))

	spec := specFor(t, "r2", oldT, newT)
	if !spec.MetadataOnly() {
		t.Fatalf("spec %+v should be metadata-only", spec)
	}
	update(t, e, f, spec, UpdateOptions{})
	expectWrites(t, f, 0, 1)
	pod := f.get("web-0")
	if pod.Labels["tier"] != "front" || pod.Annotations["note"] != "x" || pod.Labels["controller-revision-hash"] != "r2" {
		t.Fatalf("metadata not applied: labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if c := conditionOf(t, pod); c.Status != corev1.ConditionTrue {
		t.Fatalf("metadata-only update flipped the condition: %+v", c)
	}
	expectPhase(t, refresh(t, e, f), PhaseIdle)
	expectWrites(t, f, 0, 1)
}

func TestEngine_GracePeriodDelaysImagePatch(t *testing.T) {
	oldT := template(container("app", "nginx:1.25"))
	newT := template(container("app", "nginx:1.26"))
	e, f, clk := newEngine(t, newPod(oldT.Spec.Containers...))
	clk.SetTime(epoch.Add(500 * time.Millisecond))

	res := update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{GracePeriodSeconds: 10})
	// The stored time has second precision, so the deadline rounds up.
	if res.Delay != 10500*time.Millisecond {
		t.Fatalf("Update delay = %v, want 10.5s", res.Delay)
	}
	expectWrites(t, f, 1, 1)
	pod := f.get("web-0")
	if got := imageOf(t, pod, "app"); got != "nginx:1.25" {
		t.Fatalf("image patched during grace period: %s", got)
	}
	if _, ok := pod.Annotations[v1alpha1.InPlaceUpdateGraceAnnotation]; !ok {
		t.Fatalf("no grace annotation")
	}

	clk.SetTime(epoch.Add(4 * time.Second))
	r := refresh(t, e, f)
	expectPhase(t, r, PhaseWaiting)
	if r.Delay != 7*time.Second {
		t.Fatalf("Refresh delay = %v, want 7s", r.Delay)
	}
	expectWrites(t, f, 1, 1)

	clk.SetTime(epoch.Add(11 * time.Second))
	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	expectWrites(t, f, 1, 2)
	pod = f.get("web-0")
	if got := imageOf(t, pod, "app"); got != "nginx:1.26" {
		t.Fatalf("image after grace = %s, want nginx:1.26", got)
	}
	if _, ok := pod.Annotations[v1alpha1.InPlaceUpdateGraceAnnotation]; ok {
		t.Fatalf("grace annotation left behind")
	}

	f.kubeletRestart("web-0", true, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
	expectWrites(t, f, 2, 2)
}

func TestEngine_BatchesUpdateSidecarBeforeApp(t *testing.T) {
	oldT := template(container("app", "app:v1"), container("sidecar", "proxy:v1"))
	newT := template(container("app", "app:v2"), container("sidecar", "proxy:v2"))
	e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
	opts := UpdateOptions{ContainerBatches: [][]string{{"sidecar"}, {"app"}}}

	update(t, e, f, specFor(t, "r2", oldT, newT), opts)
	expectWrites(t, f, 1, 1)
	pod := f.get("web-0")
	if imageOf(t, pod, "sidecar") != "proxy:v2" || imageOf(t, pod, "app") != "app:v1" {
		t.Fatalf("first batch: sidecar=%s app=%s, want proxy:v2 app:v1", imageOf(t, pod, "sidecar"), imageOf(t, pod, "app"))
	}

	// Sidecar restarted on its new image but not ready yet: app must wait.
	f.kubeletRestart("web-0", false, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	expectWrites(t, f, 1, 1)
	if got := imageOf(t, f.get("web-0"), "app"); got != "app:v1" {
		t.Fatalf("app patched before the sidecar was ready: %s", got)
	}

	f.kubeletReady("web-0", "sidecar")
	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	expectWrites(t, f, 1, 2)
	if got := imageOf(t, f.get("web-0"), "app"); got != "app:v2" {
		t.Fatalf("app image = %s after sidecar ready, want app:v2", got)
	}

	expectPhase(t, refresh(t, e, f), PhaseUpdating) // app not restarted yet
	f.kubeletRestart("web-0", true, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
	expectWrites(t, f, 2, 2)
}

func TestEngine_ConditionTrueMidUpdateIsTakenBackBeforePatching(t *testing.T) {
	oldT := template(container("app", "app:v1"), container("sidecar", "proxy:v1"))
	newT := template(container("app", "app:v2"), container("sidecar", "proxy:v2"))
	e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
	update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{ContainerBatches: [][]string{{"sidecar"}, {"app"}}})
	f.kubeletRestart("web-0", true, newImageID)
	pod := f.get("web-0")
	setCondition(pod, corev1.ConditionTrue, "SomeoneElse", "", epoch)
	f.store(pod)

	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	expectWrites(t, f, 2, 1)
	if c := conditionOf(t, f.get("web-0")); c.Status != corev1.ConditionFalse || imageOf(t, f.get("web-0"), "app") != "app:v1" {
		t.Fatalf("condition %+v: the pod must leave service before app is patched", c)
	}
	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	expectWrites(t, f, 2, 2)
	f.kubeletRestart("web-0", true, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
}

func TestOptionsFromStrategy(t *testing.T) {
	if got := OptionsFromStrategy(nil); got.GracePeriodSeconds != 0 || got.ContainerBatches != nil {
		t.Fatalf("OptionsFromStrategy(nil) = %+v", got)
	}
	got := OptionsFromStrategy(&v1alpha1.InPlaceUpdateStrategy{GracePeriodSeconds: 5, ContainerBatches: [][]string{{"a"}}})
	if got.GracePeriodSeconds != 5 || len(got.ContainerBatches) != 1 {
		t.Fatalf("OptionsFromStrategy = %+v", got)
	}
	if d := got.withDefaults(); d.RevisionLabel != "controller-revision-hash" {
		t.Fatalf("default revision label = %q", d.RevisionLabel)
	}
}

func TestEngine_RetagCompletes(t *testing.T) {
	// v2 is a new tag on the same image: the imageID cannot change.
	oldT := template(container("app", "registry.example.com/app:v1"))
	newT := template(container("app", "registry.example.com/app:v2"))
	e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))

	update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{})
	f.kubeletRestart("web-0", true, sameImageID)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
	expectWrites(t, f, 2, 1)
}

func TestEngine_StatusImageIsNormalised(t *testing.T) {
	oldT := template(container("app", "nginx:1.25"))
	newT := template(container("app", "nginx:1.26"))
	e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))

	update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{})
	// Kubelet reports the fully qualified name and, a retag again, the same
	// imageID: only normalisation can tell the container is done.
	pod := f.get("web-0")
	st := findStatus(pod, "app", false)
	st.Image = "docker.io/library/nginx:1.26"
	f.store(pod)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
}

func TestEngine_NewPodGetsConditionTrue(t *testing.T) {
	pod := newPod(container("app", "app:v1"))
	pod.Status.Conditions = pod.Status.Conditions[:1] // PodReady only
	e, f, _ := newEngine(t, pod)

	expectPhase(t, refresh(t, e, f), PhaseIdle)
	expectWrites(t, f, 1, 0)
	if c := conditionOf(t, f.get("web-0")); c.Status != corev1.ConditionTrue {
		t.Fatalf("condition = %+v, want True", c)
	}
	refresh(t, e, f)
	expectWrites(t, f, 1, 0)
}

func TestEngine_ForeignNotReadyIsLeftAlone(t *testing.T) {
	oldT := template(container("app", "app:v1"))
	newT := template(container("app", "app:v2"))
	pod := newPod(oldT.Spec.Containers...)
	// A lifecycle hook took the Pod out of service 30s ago.
	setCondition(pod, corev1.ConditionFalse, "PreparingUpdate", "", epoch.Add(-30*time.Second))
	e, f, _ := newEngine(t, pod)

	expectPhase(t, refresh(t, e, f), PhaseIdle)
	expectWrites(t, f, 0, 0)

	// The Pod has drained for longer than the grace period: patch at once,
	// and the engine takes the hold over so that it can release it.
	res := update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{GracePeriodSeconds: 10})
	if res.Delay != 0 {
		t.Fatalf("Update delay = %v, want 0", res.Delay)
	}
	expectWrites(t, f, 1, 1)
	if got := imageOf(t, f.get("web-0"), "app"); got != "app:v2" {
		t.Fatalf("app image = %s, want app:v2", got)
	}
	f.kubeletRestart("web-0", true, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
}

// The Service label moves in the write that takes the Pod out of
// endpoints, not in the later metadata write: the Pod never serves under
// the new revision's Service before it restarts, nor under the old one's
// while it restarts.
func TestEngine_ServiceLabelMovesWithTheReadinessFlip(t *testing.T) {
	const serviceLabel = v1alpha1.RevisionHashLabel
	oldT := template(container("app", "nginx:1.25"))
	newT := template(container("app", "nginx:1.26"))
	pod := newPod(oldT.Spec.Containers...)
	pod.Labels[serviceLabel] = "aaa111"
	e, f, _ := newEngine(t, pod)

	update(t, e, f, specFor(t, "web-bbb222", oldT, newT), UpdateOptions{ServiceLabel: serviceLabel})
	expectWrites(t, f, 1, 1)
	flip := f.writes[0]
	if !flip.status || conditionOf(t, flip.pod).Status != corev1.ConditionFalse {
		t.Fatalf("first write must take the pod out of service, got %+v", flip)
	}
	if got := flip.pod.Labels[serviceLabel]; got != "bbb222" {
		t.Fatalf("label after the readiness flip = %q, want bbb222 (the short hash) in that same write", got)
	}
	if got := flip.pod.Labels["controller-revision-hash"]; got == "web-bbb222" {
		t.Fatal("the revision label moved before the state was written")
	}
	if got := f.get("web-0").Labels[serviceLabel]; got != "bbb222" {
		t.Fatalf("label after the update = %q, want bbb222", got)
	}

	// A metadata-only update (no restart) moves it in its one write, and a
	// template that drops the label cannot remove it.
	metaT := newT.DeepCopy()
	metaT.Labels["tier"] = "front"
	spec := specFor(t, "web-ccc333", newT, metaT)
	spec.RemoveLabels = append(spec.RemoveLabels, serviceLabel)
	f.kubeletRestart("web-0", true, newImageID)
	refresh(t, e, f)
	update(t, e, f, spec, UpdateOptions{ServiceLabel: serviceLabel})
	if got := f.get("web-0").Labels[serviceLabel]; got != "ccc333" {
		t.Fatalf("label after a metadata-only update = %q, want ccc333", got)
	}
}

func TestRevisionHash(t *testing.T) {
	for in, want := range map[string]string{"web-6d4f9c8b7": "6d4f9c8b7", "my-web-app-abc": "abc", "r2": "r2", "": ""} {
		if got := v1alpha1.RevisionHash(in); got != want {
			t.Errorf("RevisionHash(%q) = %q, want %q", in, got, want)
		}
	}
}

func podReady(pod *corev1.Pod) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}
