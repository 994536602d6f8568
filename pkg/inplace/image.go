package inplace

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Image references as users write them and as kubelet reports them differ in
// spelling: "nginx" in a spec is reported as "docker.io/library/nginx:latest".
// These helpers compare references by meaning. They follow the Docker
// reference rules that matter for comparison (default registry, "library/"
// namespace, default tag) without pulling in a reference parser.

const (
	defaultRegistry = "docker.io"
	defaultTag      = "latest"
)

// normalizeImage returns ref in the fully qualified form
// registry/path[:tag][@digest]. The default tag is added only when there is
// no digest, because a digest alone already names exactly one image.
func normalizeImage(ref string) string {
	ref = stripScheme(ref)
	name, digest, _ := strings.Cut(ref, "@")
	tag := ""
	// A colon after the last slash separates the tag; one before it belongs
	// to a registry port ("registry:5000/app").
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i+1:]
	}
	registry, path := splitRegistry(name)
	if tag == "" && digest == "" {
		tag = defaultTag
	}
	out := registry + "/" + path
	if tag != "" {
		out += ":" + tag
	}
	if digest != "" {
		out += "@" + digest
	}
	return out
}

// splitRegistry separates the registry host from the repository path. The
// first component is a registry only if it looks like a host (has a dot or a
// port, is localhost, or has upper case, which repositories cannot).
func splitRegistry(name string) (string, string) {
	registry, path := defaultRegistry, name
	if first, rest, ok := strings.Cut(name, "/"); ok && looksLikeHost(first) {
		registry, path = first, rest
	}
	if registry == "index.docker.io" {
		registry = defaultRegistry
	}
	if registry == defaultRegistry && !strings.Contains(path, "/") {
		path = "library/" + path
	}
	return registry, path
}

func looksLikeHost(s string) bool {
	return strings.ContainsAny(s, ".:") || s == "localhost" || s != strings.ToLower(s)
}

// stripScheme drops the "docker-pullable://" style prefixes some runtimes put
// in front of an imageID.
func stripScheme(ref string) string {
	if _, rest, ok := strings.Cut(ref, "://"); ok {
		return rest
	}
	return ref
}

// digestOf returns the "algo:hex" digest of a reference or imageID, or "".
// A bare "sha256:..." imageID is returned whole.
func digestOf(ref string) string {
	ref = stripScheme(ref)
	if i := strings.LastIndexByte(ref, '@'); i >= 0 {
		return ref[i+1:]
	}
	if strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	return ""
}

// imageMatches reports whether the container status shows specImage
// running. A digest spec is compared with the digest kubelet resolved
// (imageID), since the status image may be spelled with any tag.
func imageMatches(specImage string, status *corev1.ContainerStatus) bool {
	if d := digestOf(specImage); d != "" {
		if digestOf(status.ImageID) == d || digestOf(status.Image) == d {
			return true
		}
	}
	return status.Image != "" && normalizeImage(status.Image) == normalizeImage(specImage)
}

// containerUpdated reports whether the container runs the image of the Pod
// spec after an in-place patch. recordedImageID is the imageID recorded
// before the patch ("" when unknown).
//
// Either signal is enough: a new imageID proves kubelet started a different
// image; a status image equal to the spec covers a retag, where the new tag
// points at the same image and the imageID cannot change. Kruise requires
// the imageID to change and so waits forever on a retag.
func containerUpdated(specImage string, status *corev1.ContainerStatus, recordedImageID string) bool {
	if status == nil || status.State.Running == nil {
		return false
	}
	if recordedImageID != "" && status.ImageID != "" && status.ImageID != recordedImageID {
		return true
	}
	return imageMatches(specImage, status)
}

// findContainer returns the spec of the named container and whether it is
// an init container.
func findContainer(pod *corev1.Pod, name string) (*corev1.Container, bool) {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], true
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	return nil, false
}

func findStatus(pod *corev1.Pod, name string, init bool) *corev1.ContainerStatus {
	list := pod.Status.ContainerStatuses
	if init {
		list = pod.Status.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// currentImageID is the imageID kubelet reports for the container now, or
// "" when it reports none yet.
func currentImageID(pod *corev1.Pod, name string) string {
	_, init := findContainer(pod, name)
	if st := findStatus(pod, name, init); st != nil {
		return st.ImageID
	}
	return ""
}

// containerSettled reports whether a patched container needs no more
// waiting: it runs the spec image and is ready. Regular init containers are
// settled at once: kubelet never re-runs them in an initialised Pod, so their
// status will not change. A container that vanished has nothing to wait for.
func containerSettled(pod *corev1.Pod, name, recordedImageID string) bool {
	c, init := findContainer(pod, name)
	if c == nil {
		return true
	}
	if init && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
		return true
	}
	st := findStatus(pod, name, init)
	return st != nil && st.Ready && containerUpdated(c.Image, st, recordedImageID)
}
