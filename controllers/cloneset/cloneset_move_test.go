package cloneset

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestDecideMove(t *testing.T) {
	revision := func(t *testing.T, name, image, env string) *appsv1.ControllerRevision {
		t.Helper()
		container := corev1.Container{Name: "app", Image: image}
		if env != "" {
			container.Env = []corev1.EnvVar{{Name: "MODE", Value: env}}
		}
		raw, err := json.Marshal(corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container}}})
		if err != nil {
			t.Fatal(err)
		}
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: runtime.RawExtension{Raw: raw}}
	}
	hook := &stepwisev1.LifecycleHook{LabelsHandler: map[string]string{"example.com/drain": "true"}}
	tests := []struct {
		name     string
		strategy stepwisev1.CloneSetUpdateStrategyType
		// target's image and env; the Pod is on web-1 (app:1, no env).
		image, env string
		// podRevision is the Pod's revision label; web-1 when empty.
		podRevision string
		hook        *stepwisev1.LifecycleHook
		podLabels   map[string]string

		want     moveWay
		wantNote string
		// wantImage is the image the in-place spec sets, for moveInPlace.
		wantImage    string
		wantHookMark bool
	}{
		{name: "no strategy: recreate", image: "app:2", want: moveRecreate, wantNote: "recreating on revision web-2"},
		{name: "Recreate: recreate, even for an image", strategy: stepwisev1.RecreateCloneSetUpdateStrategyType, image: "app:2",
			want: moveRecreate, wantNote: "recreating on revision web-2"},
		{name: "an image change moves in place", strategy: stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType, image: "app:2",
			want: moveInPlace, wantImage: "app:2"},
		{name: "InPlaceOnly moves an image change in place", strategy: stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType, image: "app:2",
			want: moveInPlace, wantImage: "app:2"},
		{name: "an env change is recreated when possible", strategy: stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType, image: "app:1", env: "fast",
			want: moveRecreate, wantNote: "cannot change in place"},
		{name: "an env change is refused under InPlaceOnly", strategy: stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType, image: "app:1", env: "fast",
			want: moveRefused, wantNote: "updateStrategy.type InPlaceOnly forbids recreating it"},
		{name: "a Pod on a revision no longer recorded is recreated", strategy: stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType, image: "app:2",
			podRevision: "web-0", want: moveRecreate, wantNote: `the pod's revision "web-0" (no longer recorded)`},
		{name: "a hooked Pod is held for its hook", strategy: stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType, image: "app:2",
			hook: hook, podLabels: map[string]string{"example.com/drain": "true"}, want: moveHeldForHook},
		{name: "a Pod the hook released moves, marked Updating in the same write", strategy: stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType, image: "app:2",
			hook: hook, want: moveInPlace, wantImage: "app:2", wantHookMark: true},
		{name: "a hooked Pod whose change cannot be in place is recreated: the preDelete hook decides", strategy: stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType,
			image: "app:1", env: "fast", hook: hook, podLabels: map[string]string{"example.com/drain": "true"}, want: moveRecreate, wantNote: "cannot change in place"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, target := revision(t, "web-1", "app:1", ""), revision(t, "web-2", tt.image, tt.env)
			revs := &revisionSet{update: target, current: from, byName: map[string]*appsv1.ControllerRevision{"web-1": from, "web-2": target}}
			podRevision := tt.podRevision
			if podRevision == "" {
				podRevision = "web-1"
			}
			labels := map[string]string{RevisionLabel: podRevision}
			for k, v := range tt.podLabels {
				labels[k] = v
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-a", Labels: labels}}

			got, err := decideMove(pod, revs, target, tt.strategy, tt.hook)
			if err != nil {
				t.Fatal(err)
			}
			if got.way != tt.want {
				t.Fatalf("way %d, want %d (note %q)", got.way, tt.want, got.note)
			}
			if !strings.Contains(got.note, tt.wantNote) {
				t.Errorf("note %q does not say %q", got.note, tt.wantNote)
			}
			if tt.want != moveInPlace {
				if got.spec != nil {
					t.Errorf("a %d move carries an in-place spec", got.way)
				}
				return
			}
			if got.spec.Revision != "web-2" || got.spec.ContainerImages["app"] != tt.wantImage {
				t.Errorf("spec moves to %s with images %v, want web-2 with app=%s", got.spec.Revision, got.spec.ContainerImages, tt.wantImage)
			}
			if mark := got.spec.Labels[stepwisev1.LifecycleStateLabel]; (mark == stepwisev1.LifecycleStateUpdating) != tt.wantHookMark {
				t.Errorf("lifecycle state label %q; want Updating: %v", mark, tt.wantHookMark)
			}
		})
	}
}
