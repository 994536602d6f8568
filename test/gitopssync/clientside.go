package gitopssync

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LastAppliedAnnotation is where kubectl apply (and so Argo CD's default
// sync) keeps the manifest it applied last: the "original" of its three-way
// merge, from which it learns which fields a new manifest dropped.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// clientSideApply is `kubectl apply` as Argo CD runs it for a custom
// resource (no strategic merge schema): create with the manifest when
// missing; otherwise a JSON merge patch computed three ways, between the
// last applied manifest, the new one and the live object. A field is sent
// when the manifest sets it to another value than the live one, and deleted
// when the last applied manifest had it and the new one does not; a field
// that was never in git is never touched. The patch is an Update in
// managedFields, so the field manager owns the fields it changed.
//
// Argo CD syncs only an object that is out of sync: its diff leaves out
// IgnoreDifferences, so an object that differs only there is left alone.
func (s *Syncer) clientSideApply(ctx context.Context, desired *unstructured.Unstructured) (string, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	err := s.opts.Client.Get(ctx, client.ObjectKeyFromObject(desired), live)
	switch {
	case apierrors.IsNotFound(err):
		created, err := withLastApplied(desired)
		if err != nil {
			return "", err
		}
		if err := s.opts.Client.Create(ctx, created, client.FieldOwner(s.opts.FieldManager)); err != nil {
			return "", fmt.Errorf("creating: %w", err)
		}
		return "created", nil
	case err != nil:
		return "", fmt.Errorf("reading the live object: %w", err)
	}

	// The diff, as Argo CD computes it: ignored fields take their live values.
	normalized := desired.DeepCopy()
	if err := keepLive(normalized, live, s.opts.IgnoreDifferences); err != nil {
		return "", err
	}
	patch, err := threeWayPatch(live, normalized)
	if err != nil {
		return "", err
	}
	drift, err := drifted(patch)
	if err != nil {
		return "", err
	}
	if !drift {
		return "unchanged", nil
	}
	if !s.opts.RespectIgnoreDifferences {
		// Out of sync: the sync applies the manifest as it is in git.
		if patch, err = threeWayPatch(live, desired); err != nil {
			return "", err
		}
	}
	if err := s.opts.Client.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(s.opts.FieldManager)); err != nil {
		return "", fmt.Errorf("patching %s: %w", patch, err)
	}
	return "configured", nil
}

func isEmptyPatch(patch []byte) bool { return strings.TrimSpace(string(patch)) == "{}" }

// drifted reports whether a patch changes more than the last-applied
// annotation, which Argo CD's diff leaves out: with ignored fields, the
// annotation follows their live values and would otherwise make every
// change of theirs look like drift.
func drifted(patch []byte) (bool, error) {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return false, fmt.Errorf("decoding patch %s: %w", patch, err)
	}
	if md, ok := p["metadata"].(map[string]any); ok {
		if an, ok := md["annotations"].(map[string]any); ok {
			delete(an, LastAppliedAnnotation)
			if len(an) == 0 {
				delete(md, "annotations")
			}
		}
		if len(md) == 0 {
			delete(p, "metadata")
		}
	}
	return len(p) > 0, nil
}

// threeWayPatch is kubectl apply's patch for a type without a strategic
// merge schema, with kubectl's preconditions.
func threeWayPatch(live, desired *unstructured.Unstructured) ([]byte, error) {
	modifiedObj, err := withLastApplied(desired)
	if err != nil {
		return nil, err
	}
	modified, err := json.Marshal(modifiedObj.Object)
	if err != nil {
		return nil, err
	}
	current, err := json.Marshal(live.Object)
	if err != nil {
		return nil, err
	}
	original := []byte(live.GetAnnotations()[LastAppliedAnnotation])
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(original, modified, current,
		mergepatch.RequireKeyUnchanged("apiVersion"),
		mergepatch.RequireKeyUnchanged("kind"),
		mergepatch.RequireMetadataKeyUnchanged("name"))
	if err != nil {
		return nil, fmt.Errorf("computing the three-way merge patch: %w", err)
	}
	return patch, nil
}

// withLastApplied returns the manifest carrying itself (without that
// annotation) in LastAppliedAnnotation, as kubectl's
// GetModifiedConfiguration does.
func withLastApplied(desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := desired.DeepCopy()
	annotations := out.GetAnnotations()
	delete(annotations, LastAppliedAnnotation)
	out.SetAnnotations(annotations)
	raw, err := runtime.Encode(unstructured.UnstructuredJSONScheme, out)
	if err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[LastAppliedAnnotation] = string(raw)
	out.SetAnnotations(annotations)
	return out, nil
}

// keepLive sets each field named by a JSON pointer to its value in live, or
// removes it when live has none. Pointers into lists are not supported.
func keepLive(obj, live *unstructured.Unstructured, pointers []string) error {
	for _, p := range pointers {
		fields, err := pointerFields(p)
		if err != nil {
			return err
		}
		v, found, err := unstructured.NestedFieldCopy(live.Object, fields...)
		if err != nil {
			return fmt.Errorf("reading %s of the live object: %w", p, err)
		}
		if !found {
			unstructured.RemoveNestedField(obj.Object, fields...)
			continue
		}
		if err := unstructured.SetNestedField(obj.Object, v, fields...); err != nil {
			return fmt.Errorf("setting %s: %w", p, err)
		}
	}
	return nil
}

// pointerFields splits an RFC 6901 JSON pointer into field names.
func pointerFields(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return nil, fmt.Errorf("%q is not a JSON pointer to a field", p)
	}
	fields := strings.Split(p[1:], "/")
	for i, f := range fields {
		fields[i] = strings.ReplaceAll(strings.ReplaceAll(f, "~1", "/"), "~0", "~")
	}
	return fields, nil
}
