package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// kruiseManifest reads testdata/kruise_cloneset.yaml, a Kruise CloneSet,
// ported by changing its apiVersion only.
func kruiseManifest(t *testing.T, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile("testdata/kruise_cloneset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatalf("parsing the Kruise manifest: %v", err)
	}
	u.SetAPIVersion("stepwise.dev/v1alpha1")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestKruiseManifest: a Kruise CloneSet ports by changing apiVersion as long
// as it uses only what Stepwise implements; every Kruise field Stepwise
// lacks is refused with a message naming it, never pruned in silence (a
// pruned field would leave the workload without what the manifest asked
// for, and a GitOps tool diffing forever).
func TestKruiseManifest(t *testing.T) {
	ns := newNamespace(t)

	t.Run("fields Stepwise implements are accepted and kept", func(t *testing.T) {
		u := kruiseManifest(t, ns, "ported")
		if err := env.client.Create(context.Background(), u); err != nil {
			t.Fatalf("a Kruise manifest with only implemented fields was refused: %v", err)
		}
		for _, path := range [][]string{
			{"spec", "lifecycle", "inPlaceUpdate", "markPodNotReady"},
			{"spec", "updateStrategy", "inPlaceUpdateStrategy", "gracePeriodSeconds"},
			{"spec", "scaleStrategy", "maxUnavailable"},
		} {
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); !found {
				t.Errorf("%s was pruned", strings.Join(path, "."))
			}
		}
	})

	cases := []struct {
		name  string
		path  []string
		value any
		want  string
	}{
		{"volumeClaimTemplates", []string{"spec", "volumeClaimTemplates"}, []any{map[string]any{
			"metadata": map[string]any{"name": "data"},
			"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"},
				"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}},
		}}, "spec.volumeClaimTemplates is not supported by stepwise.dev CloneSet"},
		{"progressDeadlineSeconds", []string{"spec", "progressDeadlineSeconds"}, int64(600),
			"spec.progressDeadlineSeconds is not supported by stepwise.dev CloneSet"},
		{"lifecycle.preNormal", []string{"spec", "lifecycle", "preNormal"},
			map[string]any{"labelsHandler": map[string]any{"example.com/warm": "true"}},
			"spec.lifecycle.preNormal is not supported by stepwise.dev CloneSet"},
		{"scaleStrategy.disablePVCReuse", []string{"spec", "scaleStrategy", "disablePVCReuse"}, true,
			"spec.scaleStrategy.disablePVCReuse is not supported by stepwise.dev CloneSet"},
		{"scaleStrategy.disablePVCReuse false", []string{"spec", "scaleStrategy", "disablePVCReuse"}, false,
			"spec.scaleStrategy.disablePVCReuse is not supported by stepwise.dev CloneSet"},
		{"inPlaceUpdateStrategy.imagePreDownloadParallelism", []string{"spec", "updateStrategy", "inPlaceUpdateStrategy", "imagePreDownloadParallelism"}, int64(2),
			"spec.updateStrategy.inPlaceUpdateStrategy.imagePreDownloadParallelism is not supported by stepwise.dev CloneSet"},
		{"inPlaceUpdateStrategy.imagePreDownloadTimeoutSeconds", []string{"spec", "updateStrategy", "inPlaceUpdateStrategy", "imagePreDownloadTimeoutSeconds"}, int64(600),
			"spec.updateStrategy.inPlaceUpdateStrategy.imagePreDownloadTimeoutSeconds is not supported by stepwise.dev CloneSet"},
		{"inPlaceUpdateStrategy.imagePreDownloadMinUpdatedReadyPods", []string{"spec", "updateStrategy", "inPlaceUpdateStrategy", "imagePreDownloadMinUpdatedReadyPods"}, int64(1),
			"spec.updateStrategy.inPlaceUpdateStrategy.imagePreDownloadMinUpdatedReadyPods is not supported by stepwise.dev CloneSet"},
		// apps.kruise.io/v1beta1 (Kruise's storage version since v1.9) moves
		// the update fields under rollingUpdate; that shape is refused too.
		{"v1beta1 updateStrategy.rollingUpdate", []string{"spec", "updateStrategy", "rollingUpdate"},
			map[string]any{"partition": int64(1), "podUpdatePolicy": "InPlaceIfPossible"},
			"spec.updateStrategy.rollingUpdate is OpenKruise apps.kruise.io/v1beta1"},
		{"v1beta1 scaleStrategy.enablePVCReuse", []string{"spec", "scaleStrategy", "enablePVCReuse"}, false,
			"spec.scaleStrategy.enablePVCReuse is OpenKruise apps.kruise.io/v1beta1"},
		{"v1beta1 scaleStrategy.excludePreparingDelete", []string{"spec", "scaleStrategy", "excludePreparingDelete"}, true,
			"spec.scaleStrategy.excludePreparingDelete is OpenKruise apps.kruise.io/v1beta1"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			u := kruiseManifest(t, ns, "refused")
			if err := unstructured.SetNestedField(u.Object, tc.value, tc.path...); err != nil {
				t.Fatal(err)
			}
			err := env.client.Create(context.Background(), u)
			if err == nil {
				_ = env.client.Delete(context.Background(), u)
				t.Fatalf("the API server accepted %s; it must refuse it, not prune it", strings.Join(tc.path, "."))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the error does not say %q:\n%v", tc.want, err)
			}
			if !strings.Contains(err.Error(), "remove it") && !strings.Contains(err.Error(), "move its fields") {
				t.Errorf("the error does not say what to do:\n%v", err)
			}
		})
	}
}
