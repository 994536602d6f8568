package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	cloneSetPartitionPath    = []string{"spec", "updateStrategy", "partition"}
	statefulSetPartitionPath = []string{"spec", "updateStrategy", "rollingUpdate", "partition"}
)

// base holds what the three adapters do alike: the partition write, the
// managed-fields read, Pods and revisions. They differ only in how they
// read their object.
type base struct {
	gvk  schema.GroupVersionKind
	key  types.NamespacedName
	path []string
	c    Clients
}

func (b *base) describe() string { return fmt.Sprintf("%s %s", b.gvk.Kind, b.key.Name) }

// SetPartition applies only the partition. The apply configuration is
// unstructured for all kinds, so that the same few lines serve a CRD whose
// Go types are not a dependency (OpenKruise) and a kind that stores an
// integer (StatefulSet).
func (b *base) SetPartition(ctx context.Context, obs Observation, p intstr.IntOrString) error {
	stored, err := obs.Stored(p)
	if err != nil {
		return fmt.Errorf("resolving partition for %s: %w", b.describe(), err)
	}
	var value any = stored.StrVal
	if stored.Type == intstr.Int {
		value = int64(stored.IntVal)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(b.gvk)
	u.SetNamespace(b.key.Namespace)
	u.SetName(b.key.Name)
	// The UID is a precondition: apply would otherwise create a workload
	// deleted since it was observed, holding nothing but a partition.
	u.SetUID(obs.UID)
	if err := unstructured.SetNestedField(u.Object, value, b.path...); err != nil {
		return fmt.Errorf("building partition apply for %s: %w", b.describe(), err)
	}
	if err := b.c.Writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s=%s to %s: %w", joinPath(b.path), stored.String(), b.describe(), err)
	}
	return nil
}

// PartitionManagers reads only the object's metadata, around the cache.
func (b *base) PartitionManagers(ctx context.Context) ([]string, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(b.gvk)
	if err := b.c.APIReader.Get(ctx, b.key, meta); err != nil {
		return nil, fmt.Errorf("reading managed fields of %s: %w", b.describe(), err)
	}
	return managersOwning(meta.GetManagedFields(), b.path)
}

// managersOwning returns the managers other than FieldManager whose entries
// hold the field at path, sorted and without duplicates. Status entries are
// skipped: the partition is a spec field.
func managersOwning(entries []metav1.ManagedFieldsEntry, path []string) ([]string, error) {
	var out []string
	for _, e := range entries {
		if e.Manager == FieldManager || e.Subresource != "" || e.FieldsV1 == nil || len(e.FieldsV1.GetRawBytes()) == 0 {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			return nil, fmt.Errorf("decoding managed fields of manager %q: %w", e.Manager, err)
		}
		if holds(fields, path) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// holds walks a FieldsV1 set ({"f:spec":{"f:updateStrategy":{...}}}).
func holds(fields map[string]any, path []string) bool {
	node := fields
	for i, name := range path {
		child, ok := node["f:"+name]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if node, ok = child.(map[string]any); !ok {
			return false
		}
	}
	return false
}

// PodNames lists the workload's Pods on revision, from the cache. A
// workload without a selector has no Pods: an empty selector would match
// every Pod in the namespace.
func (b *base) PodNames(ctx context.Context, obs Observation, revision string) ([]string, error) {
	if obs.Selector == nil || obs.Selector.Empty() || revision == "" {
		return nil, nil
	}
	req, err := labels.NewRequirement(appsv1.ControllerRevisionHashLabelKey, selection.Equals, []string{revision})
	if err != nil {
		// Revision names are label values everywhere they are used; a name
		// that is not one has no Pods.
		return nil, nil //nolint:nilerr // not a failure: no Pod can carry it
	}
	pods, err := b.c.Pods.List(b.key.Namespace, obs.Selector.Add(*req))
	if err != nil {
		return nil, fmt.Errorf("listing Pods of %s on revision %s: %w", b.describe(), revision, err)
	}
	names := make([]string, 0, len(pods))
	for _, pod := range pods {
		names = append(names, pod.Name)
	}
	return names, nil
}

// Pods lists the workload's Pods from the cache: those its selector
// matches and whose controller is the workload (the UID observed), so that
// another workload's Pods under an overlapping selector are never touched.
func (b *base) Pods(ctx context.Context, obs Observation) ([]*corev1.Pod, error) {
	if obs.Selector == nil || obs.Selector.Empty() {
		return nil, nil
	}
	list, err := b.c.Pods.List(b.key.Namespace, obs.Selector)
	if err != nil {
		return nil, fmt.Errorf("listing Pods of %s: %w", b.describe(), err)
	}
	pods := make([]*corev1.Pod, 0, len(list))
	for _, pod := range list {
		if owner := metav1.GetControllerOfNoCopy(pod); owner != nil && owner.UID == obs.UID {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// DeletePod deletes one Pod with its UID as a precondition.
func (b *base) DeletePod(ctx context.Context, name string, uid types.UID) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.key.Namespace, Name: name}}
	err := b.c.Writer.Delete(ctx, pod, client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("deleting Pod %s of %s: %w", name, b.describe(), err)
}

// Revision reads the revision's ControllerRevision, which all three
// workloads name after the revision; when it has been pruned, a Pod still on
// the revision; for the update revision, the template itself.
func (b *base) Revision(ctx context.Context, obs Observation, name string) (Revision, error) {
	if name == "" {
		return Revision{}, nil
	}
	var cr appsv1.ControllerRevision
	err := b.c.Reader.Get(ctx, types.NamespacedName{Namespace: b.key.Namespace, Name: name}, &cr)
	switch {
	case err == nil:
		template, err := decodeTemplate(cr.Data.Raw)
		if err != nil {
			return Revision{}, fmt.Errorf("reading ControllerRevision %s of %s: %w", name, b.describe(), err)
		}
		return Revision{Found: true, Images: imagesOf(&template.Spec), Created: cr.CreationTimestamp.Time}, nil
	case !apierrors.IsNotFound(err):
		return Revision{}, fmt.Errorf("reading ControllerRevision %s of %s: %w", name, b.describe(), err)
	}
	if name == obs.UpdateRevision && obs.ObservedGenerationCurrent() && obs.Images != nil {
		return Revision{Found: true, Images: obs.Images}, nil
	}
	if obs.Selector == nil || obs.Selector.Empty() {
		return Revision{}, nil
	}
	req, err := labels.NewRequirement(appsv1.ControllerRevisionHashLabelKey, selection.Equals, []string{name})
	if err != nil {
		return Revision{}, nil //nolint:nilerr // not a label value: no Pod carries it
	}
	pods, err := b.c.Pods.List(b.key.Namespace, obs.Selector.Add(*req))
	if err != nil {
		return Revision{}, fmt.Errorf("listing Pods of %s on revision %s: %w", b.describe(), name, err)
	}
	if len(pods) == 0 {
		return Revision{}, nil
	}
	return Revision{Found: true, Images: imagesOf(&pods[0].Spec)}, nil
}

// decodeTemplate reads the Pod template a ControllerRevision stores:
// Stepwise's CloneSet stores the template itself, StatefulSets and
// OpenKruise's CloneSet a patch {"spec":{"template":{...}}}.
func decodeTemplate(raw []byte) (*corev1.PodTemplateSpec, error) {
	var patch struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &patch); err == nil && patch.Spec.Template != nil {
		return patch.Spec.Template, nil
	}
	template := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(raw, template); err != nil {
		return nil, fmt.Errorf("decoding Pod template: %w", err)
	}
	return template, nil
}

func joinPath(path []string) string { return strings.Join(path, ".") }
