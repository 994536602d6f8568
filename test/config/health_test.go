package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/test/argocdhealth"
)

var healthScripts = map[string]string{
	"resource.customizations.health.stepwise.dev_Rollout":  "rollout-health.lua",
	"resource.customizations.health.stepwise.dev_CloneSet": "cloneset-health.lua",
}

// The ConfigMap patch carries copies of the scripts (argocd-cm has no way
// to point at a file): they must not drift from the files tested below.
func TestArgoCDPatchEmbedsTheScripts(t *testing.T) {
	cm := readYAML[corev1.ConfigMap](t, filepath.Join("argocd", "argocd-cm-patch.yaml"))
	if cm.Kind != "ConfigMap" || cm.Name != "argocd-cm" || cm.Namespace != "argocd" {
		t.Errorf("patch targets %s %s/%s, want ConfigMap argocd/argocd-cm", cm.Kind, cm.Namespace, cm.Name)
	}
	for key, file := range healthScripts {
		script, err := os.ReadFile(filepath.Join("argocd", file))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[key] != string(script) {
			t.Errorf("argocd-cm-patch.yaml %s differs from argocd/%s: copy the script into the patch again", key, file)
		}
	}
	if len(cm.Data) != len(healthScripts) {
		t.Errorf("patch sets %d keys, want %d", len(cm.Data), len(healthScripts))
	}
}

type healthCase struct {
	name string
	// obj is the object without apiVersion and kind, in YAML.
	obj    string
	status string
	// message is a part of the expected message; empty: not checked.
	message string
	// kstatus, when set, is what Flux's health check (kstatus.Compute)
	// says of the object, and kstatusMessage a part of its message.
	kstatus        kstatus.Status
	kstatusMessage string
}

// sampleObject turns a YAML sample into the map Argo CD hands the script.
// The sample is first decoded strictly into the Stepwise Go type, so that a
// misspelt field fails the test instead of going unnoticed by the script
// (which would just see nil). Then it is decoded as unstructured, which
// makes integers int64, as in objects read from the API server.
func sampleObject[T any](t *testing.T, kind, doc string) map[string]any {
	t.Helper()
	data, err := yaml.YAMLToJSONStrict([]byte("apiVersion: stepwise.dev/v1alpha1\nkind: " + kind + "\n" + doc))
	if err != nil {
		t.Fatal(err)
	}
	var typed T
	strictErrs, err := kjson.UnmarshalStrict(data, &typed)
	if err != nil {
		t.Fatalf("sample is not a %s: %v", kind, err)
	}
	for _, e := range strictErrs {
		t.Fatalf("sample is not a %s: %v", kind, e)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u.Object
}

func runHealthCases[T any](t *testing.T, kind, file string, cases []healthCase) {
	script, err := os.ReadFile(filepath.Join("argocd", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := sampleObject[T](t, kind, tc.obj)
			status, message, err := argocdhealth.Evaluate(string(script), obj)
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.status || !strings.Contains(message, tc.message) {
				t.Errorf("got %s %q, want %s with a message containing %q", status, message, tc.status, tc.message)
			}
			if tc.kstatus == "" {
				return
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatalf("kstatus: %v", err)
			}
			if res.Status != tc.kstatus || !strings.Contains(res.Message, tc.kstatusMessage) {
				t.Errorf("kstatus: got %s %q, want %s with a message containing %q", res.Status, res.Message, tc.kstatus, tc.kstatusMessage)
			}
		})
	}
}
