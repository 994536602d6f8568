package inplace

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestCalculateSpec(t *testing.T) {
	base := func() *corev1.PodTemplateSpec {
		tpl := template(
			corev1.Container{
				Name: "app", Image: "app:v1",
				Env: []corev1.EnvVar{{Name: "MODE", Value: "a"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				},
			},
			container("sidecar", "proxy:v1"),
		)
		tpl.Annotations = map[string]string{"keep": "1", "drop": "1"}
		tpl.Spec.InitContainers = []corev1.Container{container("init", "init:v1")}
		return tpl
	}

	tests := []struct {
		name       string
		mutate     func(*corev1.PodTemplateSpec)
		want       *UpdateSpec
		wantField  string // non-empty: want *NotInPlaceError naming this field
		wantReason string
	}{
		{name: "identical_templates_change_nothing", mutate: func(*corev1.PodTemplateSpec) {}, want: &UpdateSpec{}},
		{
			name:   "container_image",
			mutate: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "app:v2" },
			want:   &UpdateSpec{ContainerImages: map[string]string{"app": "app:v2"}},
		},
		{
			name: "two_images",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Image = "app:v2"
				t.Spec.Containers[1].Image = "proxy:v2"
			},
			want: &UpdateSpec{ContainerImages: map[string]string{"app": "app:v2", "sidecar": "proxy:v2"}},
		},
		{
			name:   "init_container_image",
			mutate: func(t *corev1.PodTemplateSpec) { t.Spec.InitContainers[0].Image = "init:v2" },
			want:   &UpdateSpec{InitContainerImages: map[string]string{"init": "init:v2"}},
		},
		{
			name:   "image_respelled_is_still_a_change",
			mutate: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "docker.io/library/app:v1" },
			want:   &UpdateSpec{ContainerImages: map[string]string{"app": "docker.io/library/app:v1"}},
		},
		{
			name: "labels_and_annotations",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Labels["tier"] = "front"
				t.Labels["app"] = "web2"
				delete(t.Annotations, "drop")
				t.Annotations["new"] = "x"
			},
			want: &UpdateSpec{
				Labels:            map[string]string{"tier": "front", "app": "web2"},
				Annotations:       map[string]string{"new": "x"},
				RemoveAnnotations: []string{"drop"},
			},
		},
		{
			name: "semantically_equal_quantity_is_no_change",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000m")
			},
			want: &UpdateSpec{},
		},
		{
			name:   "empty_and_nil_lists_are_equal",
			mutate: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[1].Env = []corev1.EnvVar{} },
			want:   &UpdateSpec{},
		},
		{
			name:      "env",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env[0].Value = "b" },
			wantField: "spec.containers[app].env",
		},
		{
			name: "image_and_env_together_refused",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Image = "app:v2"
				t.Spec.Containers[0].Env = nil
			},
			wantField: "spec.containers[app].env",
		},
		{
			name: "first_field_in_api_order_is_named",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Env = nil
				t.Spec.Containers[0].Command = []string{"run"}
			},
			wantField: "spec.containers[app].command",
		},
		{
			name:      "args",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.Containers[1].Args = []string{"-v"} },
			wantField: "spec.containers[sidecar].args",
		},
		{
			name: "ports",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
			},
			wantField: "spec.containers[app].ports",
		},
		{
			name: "resources",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
			},
			wantField: "spec.containers[app].resources",
		},
		{
			name:      "image_pull_policy",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways },
			wantField: "spec.containers[app].imagePullPolicy",
		},
		{
			name:      "init_container_env",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "X"}} },
			wantField: "spec.initContainers[init].env",
		},
		{
			name: "container_added",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers = append(t.Spec.Containers, container("logger", "log:v1"))
			},
			wantField: "spec.containers[logger]", wantReason: "container added",
		},
		{
			name:      "container_removed",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.Containers = t.Spec.Containers[:1] },
			wantField: "spec.containers[sidecar]", wantReason: "container removed",
		},
		{
			name:      "container_renamed",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.Containers[1].Name = "proxy" },
			wantField: "spec.containers[proxy]", wantReason: `container renamed from "sidecar"`,
		},
		{
			name: "containers_reordered",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0], t.Spec.Containers[1] = t.Spec.Containers[1], t.Spec.Containers[0]
			},
			wantField: "spec.containers", wantReason: "containers reordered",
		},
		{
			name: "volumes",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			},
			wantField: "spec.volumes",
		},
		{
			name:      "node_selector",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.NodeSelector = map[string]string{"zone": "a"} },
			wantField: "spec.nodeSelector",
		},
		{
			name:      "termination_grace_period",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5) },
			wantField: "spec.terminationGracePeriodSeconds",
		},
		{
			name:      "template_metadata_other_than_labels_and_annotations",
			mutate:    func(t *corev1.PodTemplateSpec) { t.Finalizers = []string{"x"} },
			wantField: "metadata.finalizers",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			oldT := base()
			newT := base()
			tc.mutate(newT)
			got, err := CalculateSpec(oldT, newT)
			if tc.wantField != "" {
				var nip *NotInPlaceError
				if !errors.As(err, &nip) {
					t.Fatalf("err = %v, want *NotInPlaceError", err)
				}
				if nip.Field != tc.wantField || nip.Reason != tc.wantReason {
					t.Fatalf("NotInPlaceError = %q/%q, want %q/%q", nip.Field, nip.Reason, tc.wantField, tc.wantReason)
				}
				if got != nil {
					t.Fatalf("spec = %+v with an error, want nil", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("spec = %+v, want %+v", got, tc.want)
			}
			if got.MetadataOnly() != (len(tc.want.ContainerImages)+len(tc.want.InitContainerImages) == 0) {
				t.Fatalf("MetadataOnly() = %v", got.MetadataOnly())
			}
		})
	}
}

func TestNotInPlaceErrorMessageNamesTheField(t *testing.T) {
	cases := map[string]*NotInPlaceError{
		"spec.containers[app].env cannot change in place":                       {Field: "spec.containers[app].env"},
		"spec.containers[logger] cannot change in place: container added":       {Field: "spec.containers[logger]", Reason: "container added"},
		"spec.containers cannot change in place: containers reordered":          {Field: "spec.containers", Reason: "containers reordered"},
		"spec.initContainers[init].image cannot change in place: anything else": {Field: "spec.initContainers[init].image", Reason: "anything else"},
	}
	for want, err := range cases {
		if err.Error() != want {
			t.Errorf("Error() = %q, want %q", err.Error(), want)
		}
	}
}

func TestCalculateSpecRejectsNil(t *testing.T) {
	if _, err := CalculateSpec(nil, template()); err == nil {
		t.Fatal("want an error for a nil template")
	}
	var nip *NotInPlaceError
	if _, err := CalculateSpec(template(), nil); errors.As(err, &nip) {
		t.Fatal("a nil template is a caller bug, not a NotInPlaceError")
	}
}

func TestCanUpdateInPlace(t *testing.T) {
	e := New(nil, nil)
	oldT := template(container("app", "app:v1"))
	img := template(container("app", "app:v2"))
	env := template(corev1.Container{Name: "app", Image: "app:v1", Env: []corev1.EnvVar{{Name: "A"}}})
	if !e.CanUpdateInPlace(oldT, img) {
		t.Error("an image change must be possible in place")
	}
	if e.CanUpdateInPlace(oldT, env) {
		t.Error("an env change must not be possible in place")
	}
}

func TestSpecForTemplate(t *testing.T) {
	tpl := template(container("app", "app:v2"))
	tpl.Spec.InitContainers = []corev1.Container{container("init", "init:v2")}
	got := SpecForTemplate(tpl, "r2")
	want := &UpdateSpec{
		Revision:            "r2",
		ContainerImages:     map[string]string{"app": "app:v2"},
		InitContainerImages: map[string]string{"init": "init:v2"},
		Labels:              map[string]string{"app": "web"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SpecForTemplate = %+v, want %+v", got, want)
	}
}
