package inplace

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestNormalizeImage(t *testing.T) {
	tests := map[string]string{
		"nginx":                                  "docker.io/library/nginx:latest",
		"nginx:1.25":                             "docker.io/library/nginx:1.25",
		"docker.io/library/nginx:latest":         "docker.io/library/nginx:latest",
		"docker.io/nginx":                        "docker.io/library/nginx:latest",
		"index.docker.io/library/nginx:1":        "docker.io/library/nginx:1",
		"repo/app:tag":                           "docker.io/repo/app:tag",
		"registry.example.com/app":               "registry.example.com/app:latest",
		"registry.example.com:5000/team/app:1.0": "registry.example.com:5000/team/app:1.0",
		"localhost/app":                          "localhost/app:latest",
		"localhost:5000/app:v1":                  "localhost:5000/app:v1",
		"nginx@sha256:abc":                       "docker.io/library/nginx@sha256:abc",
		"nginx:1.25@sha256:abc":                  "docker.io/library/nginx:1.25@sha256:abc",
		"docker-pullable://nginx@sha256:abc":     "docker.io/library/nginx@sha256:abc",
	}
	for in, want := range tests {
		if got := normalizeImage(in); got != want {
			t.Errorf("normalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDigestOf(t *testing.T) {
	tests := map[string]string{
		"nginx:1.25":                             "",
		"docker.io/library/nginx@sha256:abc":     "sha256:abc",
		"docker-pullable://nginx@sha256:abc":     "sha256:abc",
		"sha256:0123":                            "sha256:0123",
		"registry.example.com:5000/app@sha256:f": "sha256:f",
	}
	for in, want := range tests {
		if got := digestOf(in); got != want {
			t.Errorf("digestOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContainerUpdated(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}
	tests := []struct {
		name     string
		spec     string
		status   *corev1.ContainerStatus
		recorded string
		want     bool
	}{
		{
			name: "no_status_yet", spec: "app:v2", status: nil, want: false,
		},
		{
			name: "old_container_still_running", spec: "app:v2", recorded: "id1",
			status: &corev1.ContainerStatus{Image: "app:v1", ImageID: "id1", State: running},
		},
		{
			name: "restarted_on_new_image", spec: "app:v2", recorded: "id1", want: true,
			status: &corev1.ContainerStatus{Image: "app:v2", ImageID: "id2", State: running},
		},
		{
			name: "new_imageID_is_enough", spec: "app:v2", recorded: "id1", want: true,
			status: &corev1.ContainerStatus{Image: "sha256:0123", ImageID: "id2", State: running},
		},
		{
			name: "pulling_is_not_done", spec: "app:v2", recorded: "id1",
			status: &corev1.ContainerStatus{Image: "app:v2", ImageID: "", State: waiting},
		},
		{
			name: "retag_same_imageID_done_by_image", spec: "app:v2", recorded: "id1", want: true,
			status: &corev1.ContainerStatus{Image: "docker.io/library/app:v2", ImageID: "id1", State: running},
		},
		{
			name: "short_name_vs_qualified_status", spec: "nginx", recorded: "id1", want: true,
			status: &corev1.ContainerStatus{Image: "docker.io/library/nginx:latest", ImageID: "id1", State: running},
		},
		{
			name: "repo_tag_vs_docker_io", spec: "repo/app:tag", recorded: "id1", want: true,
			status: &corev1.ContainerStatus{Image: "docker.io/repo/app:tag", ImageID: "id1", State: running},
		},
		{
			name: "digest_spec_matches_imageID", spec: "registry.example.com/app@sha256:new", recorded: "registry.example.com/app@sha256:old", want: true,
			status: &corev1.ContainerStatus{Image: "registry.example.com/app:v2", ImageID: "registry.example.com/app@sha256:new", State: running},
		},
		{
			name: "digest_spec_old_digest_running", spec: "registry.example.com/app@sha256:new", recorded: "registry.example.com/app@sha256:old",
			status: &corev1.ContainerStatus{Image: "registry.example.com/app:v1", ImageID: "registry.example.com/app@sha256:old", State: running},
		},
		{
			name: "unknown_record_relies_on_image", spec: "app:v2", recorded: "",
			status: &corev1.ContainerStatus{Image: "app:v1", ImageID: "id9", State: running},
		},
		{
			name: "other_tag_same_id_is_not_done", spec: "app:v2", recorded: "id1",
			status: &corev1.ContainerStatus{Image: "app:v1", ImageID: "id1", State: running},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := containerUpdated(tc.spec, tc.status, tc.recorded); got != tc.want {
				t.Fatalf("containerUpdated = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestContainerSettled(t *testing.T) {
	pod := newPod(container("app", "app:v2"))
	pod.Spec.InitContainers = []corev1.Container{
		container("init", "init:v2"),
		{Name: "mesh", Image: "mesh:v2", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{
		{Name: "init", Image: "init:v1", ImageID: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
		{Name: "mesh", Image: "mesh:v1", ImageID: "m1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}
	if !containerSettled(pod, "init", "i1") {
		t.Error("a regular init container is never re-run, so it is settled once patched")
	}
	if containerSettled(pod, "mesh", "m1") {
		t.Error("a sidecar init container must restart on its new image")
	}
	if !containerSettled(pod, "app", "") {
		t.Error("app runs its spec image and is ready")
	}
	findStatus(pod, "app", false).Ready = false
	if containerSettled(pod, "app", "") {
		t.Error("an unready container is not settled")
	}
	if !containerSettled(pod, "gone", "") {
		t.Error("a container missing from the pod has nothing to wait for")
	}
}
