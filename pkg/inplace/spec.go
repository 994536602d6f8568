package inplace

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// UpdateSpec is what moving a Pod from one template to another changes, when
// the change can be applied without recreating the Pod.
type UpdateSpec struct {
	// Revision is the controller-revision-hash the Pod moves to. CalculateSpec
	// leaves it empty: the caller knows the revision, the diff does not.
	Revision string

	// ContainerImages maps a container name to its new image.
	ContainerImages map[string]string
	// InitContainerImages maps an init container name to its new image.
	InitContainerImages map[string]string

	// Labels are set on the Pod; RemoveLabels are deleted from it.
	Labels       map[string]string
	RemoveLabels []string
	// Annotations are set on the Pod; RemoveAnnotations are deleted from it.
	Annotations       map[string]string
	RemoveAnnotations []string
}

// MetadataOnly reports whether the spec changes no image, so applying it
// restarts nothing and needs no readiness flip.
func (s *UpdateSpec) MetadataOnly() bool {
	return len(s.ContainerImages) == 0 && len(s.InitContainerImages) == 0
}

// images merges both image maps. Container names are unique across
// containers and init containers in a Pod, so one map loses nothing.
func (s *UpdateSpec) images() map[string]string {
	out := make(map[string]string, len(s.ContainerImages)+len(s.InitContainerImages))
	for name, image := range s.InitContainerImages {
		out[name] = image
	}
	for name, image := range s.ContainerImages {
		out[name] = image
	}
	return out
}

// NotInPlaceError says that a template change cannot be applied to a running
// Pod. Field is the path of the first differing field, containers named, for
// example "spec.containers[app].env", so an Event can tell the user exactly
// what forced a recreate.
type NotInPlaceError struct {
	Field string
	// Reason adds detail when the field path alone is not enough, such as
	// "container added".
	Reason string
}

func (e *NotInPlaceError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%s cannot change in place", e.Field)
	}
	return fmt.Sprintf("%s cannot change in place: %s", e.Field, e.Reason)
}

// CalculateSpec returns what must change on a Pod created from oldTemplate so
// that it matches newTemplate. Only images and template labels/annotations
// can change in place; any other difference returns a *NotInPlaceError. The
// API server refuses every other Pod spec change (env included), so there is
// no point trying.
func CalculateSpec(oldTemplate, newTemplate *corev1.PodTemplateSpec) (*UpdateSpec, error) {
	if oldTemplate == nil || newTemplate == nil {
		return nil, errors.New("calculate in-place spec: nil pod template")
	}
	if field := firstDifference("metadata", oldTemplate.ObjectMeta, newTemplate.ObjectMeta, "labels", "annotations"); field != "" {
		return nil, &NotInPlaceError{Field: field}
	}
	spec := &UpdateSpec{}
	spec.Labels, spec.RemoveLabels = diffStringMap(oldTemplate.Labels, newTemplate.Labels)
	spec.Annotations, spec.RemoveAnnotations = diffStringMap(oldTemplate.Annotations, newTemplate.Annotations)

	// Walk PodSpec in field order so the reported field is the first one in
	// the struct, whatever kind of difference it is.
	oldSpec, newSpec := reflect.ValueOf(oldTemplate.Spec), reflect.ValueOf(newTemplate.Spec)
	specType := oldSpec.Type()
	for i := range specType.NumField() {
		f := specType.Field(i)
		if !f.IsExported() {
			continue
		}
		path := "spec." + jsonName(f)
		var err error
		switch f.Name {
		case "InitContainers":
			spec.InitContainerImages, err = diffContainers(path, oldTemplate.Spec.InitContainers, newTemplate.Spec.InitContainers)
		case "Containers":
			spec.ContainerImages, err = diffContainers(path, oldTemplate.Spec.Containers, newTemplate.Spec.Containers)
		default:
			if !apiequality.Semantic.DeepEqual(oldSpec.Field(i).Interface(), newSpec.Field(i).Interface()) {
				err = &NotInPlaceError{Field: path}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// SpecForTemplate returns a spec that targets every image, label and
// annotation of template. Use it to re-drive a Pod whose recorded state was
// lost (corrupt annotation): Update patches only the images that differ and
// waits for the others to be running.
func SpecForTemplate(template *corev1.PodTemplateSpec, revision string) *UpdateSpec {
	spec := &UpdateSpec{Revision: revision}
	for _, c := range template.Spec.InitContainers {
		if spec.InitContainerImages == nil {
			spec.InitContainerImages = map[string]string{}
		}
		spec.InitContainerImages[c.Name] = c.Image
	}
	for _, c := range template.Spec.Containers {
		if spec.ContainerImages == nil {
			spec.ContainerImages = map[string]string{}
		}
		spec.ContainerImages[c.Name] = c.Image
	}
	spec.Labels, _ = diffStringMap(nil, template.Labels)
	spec.Annotations, _ = diffStringMap(nil, template.Annotations)
	return spec
}

// diffContainers returns the new image of every container whose image
// changed, or a *NotInPlaceError when containers were added, removed,
// renamed, reordered, or changed in anything but their image.
func diffContainers(path string, oldList, newList []corev1.Container) (map[string]string, error) {
	oldNames := containerNames(oldList)
	newNames := containerNames(newList)
	for i, c := range newList {
		if slices.Contains(oldNames, c.Name) {
			continue
		}
		reason := "container added"
		if i < len(oldList) && !slices.Contains(newNames, oldList[i].Name) {
			reason = fmt.Sprintf("container renamed from %q", oldList[i].Name)
		}
		return nil, &NotInPlaceError{Field: fmt.Sprintf("%s[%s]", path, c.Name), Reason: reason}
	}
	for _, c := range oldList {
		if !slices.Contains(newNames, c.Name) {
			return nil, &NotInPlaceError{Field: fmt.Sprintf("%s[%s]", path, c.Name), Reason: "container removed"}
		}
	}
	if !slices.Equal(oldNames, newNames) {
		return nil, &NotInPlaceError{Field: path, Reason: "containers reordered"}
	}
	var images map[string]string
	for i := range newList {
		oldC, newC := oldList[i], newList[i]
		prefix := fmt.Sprintf("%s[%s]", path, newC.Name)
		if field := firstDifference(prefix, oldC, newC, "image"); field != "" {
			return nil, &NotInPlaceError{Field: field}
		}
		// Compare the strings, not normalised references: "nginx" and
		// "docker.io/library/nginx:latest" are different specs, and the Pod
		// spec must end up equal to the template.
		if oldC.Image != newC.Image {
			if images == nil {
				images = map[string]string{}
			}
			images[newC.Name] = newC.Image
		}
	}
	return images, nil
}

func containerNames(list []corev1.Container) []string {
	names := make([]string, 0, len(list))
	for _, c := range list {
		names = append(names, c.Name)
	}
	return names
}

// firstDifference compares two structs of the same type field by field,
// semantically, and returns prefix.jsonName of the first field that differs,
// or "" when they are equal. Fields named in skip (JSON names) are ignored.
func firstDifference(prefix string, a, b any, skip ...string) string {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	t := av.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := jsonName(f)
		if slices.Contains(skip, name) {
			continue
		}
		if !apiequality.Semantic.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return prefix + "." + name
		}
	}
	return ""
}

// jsonName is the field's name in the API, which is what users write in
// manifests and so what an error message should say.
func jsonName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "" || tag == "-" {
		return f.Name
	}
	return tag
}

// diffStringMap returns the entries of newMap that are absent from or
// different in oldMap, and the sorted keys of oldMap missing from newMap.
func diffStringMap(oldMap, newMap map[string]string) (map[string]string, []string) {
	var set map[string]string
	for k, v := range newMap {
		if old, ok := oldMap[k]; ok && old == v {
			continue
		}
		if set == nil {
			set = map[string]string{}
		}
		set[k] = v
	}
	var remove []string
	for k := range oldMap {
		if _, ok := newMap[k]; !ok {
			remove = append(remove, k)
		}
	}
	slices.Sort(remove)
	return set, remove
}
