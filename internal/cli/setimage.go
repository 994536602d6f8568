package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// ImageChange is one container's image, before and after.
type ImageChange struct {
	Container string
	From, To  string
}

// ParseImages reads set image's CONTAINER=IMAGE arguments, in order.
func ParseImages(args []string) ([]ImageChange, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("at least one CONTAINER=IMAGE is required")
	}
	var out []ImageChange
	for _, a := range args {
		name, image, ok := strings.Cut(a, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%q is not CONTAINER=IMAGE", a)
		case name == "":
			return nil, fmt.Errorf("%q names no container", a)
		case image == "" || strings.ContainsAny(image, " \t\n"):
			return nil, fmt.Errorf("%q: %q is not an image reference", a, image)
		case slices.ContainsFunc(out, func(c ImageChange) bool { return c.Container == name }):
			return nil, fmt.Errorf("container %q is named twice", name)
		}
		out = append(out, ImageChange{Container: name, To: image})
	}
	return out, nil
}

// SetImageResult is what set image did.
type SetImageResult struct {
	// Changes are the containers whose image changed; a container already
	// on its image is left out.
	Changes []ImageChange
	// Rollout names the Rollout that governs the CloneSet, if one does: it
	// rolls the new template out in steps.
	Rollout string
}

// SetImage changes container images in a stepwise.dev CloneSet's template,
// which kubectl set image cannot do for a custom resource. The JSON patch
// replaces each image at its container's index after testing that the
// container there is still the one read, so nothing else in the template
// is written and a concurrent edit that moved containers fails the patch
// instead of changing the wrong one. A CloneSet applied by a GitOps tool
// is refused unless ignoreGitOps.
func SetImage(ctx context.Context, dyn dynamic.Interface, namespace, name string, changes []ImageChange, ignoreGitOps bool) (SetImageResult, error) {
	var res SetImageResult
	client := dyn.Resource(CloneSetResource()).Namespace(namespace)
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("reading cloneset %s/%s: %w", namespace, name, err)
	}
	if owner := GitOpsOwner(u); owner != "" && !ignoreGitOps {
		return res, &GitOpsError{What: "cloneset " + namespace + "/" + name, Owner: owner, Instead: "change the image in git"}
	}
	cs, err := CloneSetFromUnstructured(u)
	if err != nil {
		return res, err
	}
	if cs.Status.Rollout != nil {
		res.Rollout = cs.Status.Rollout.Name
	}
	spec := &cs.Spec.Template.Spec
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	var patch []op
	for _, c := range changes {
		field, i := "containers", slices.IndexFunc(spec.Containers, func(k corev1.Container) bool { return k.Name == c.Container })
		from := ""
		if i >= 0 {
			from = spec.Containers[i].Image
		} else if i = slices.IndexFunc(spec.InitContainers, func(k corev1.Container) bool { return k.Name == c.Container }); i >= 0 {
			field, from = "initContainers", spec.InitContainers[i].Image
		} else {
			return res, fmt.Errorf("cloneset %s/%s has no container %q (it has %s)", namespace, name, c.Container, strings.Join(containerNames(cs.Spec.Template.Spec), ", "))
		}
		if from == c.To {
			continue
		}
		at := fmt.Sprintf("/spec/template/spec/%s/%d", field, i)
		patch = append(patch, op{"test", at + "/name", c.Container}, op{"replace", at + "/image", c.To})
		res.Changes = append(res.Changes, ImageChange{Container: c.Container, From: from, To: c.To})
	}
	if len(patch) == 0 {
		return res, nil
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return res, fmt.Errorf("encoding the image patch: %w", err)
	}
	if _, err := client.Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return res, fmt.Errorf("setting the image of cloneset %s/%s: %w", namespace, name, err)
	}
	return res, nil
}

// containerNames lists a Pod's containers, init containers last.
func containerNames(spec corev1.PodSpec) []string {
	var names []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range spec.InitContainers {
		names = append(names, c.Name+" (init)")
	}
	return names
}
