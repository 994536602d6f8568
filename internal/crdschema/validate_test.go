package crdschema

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

const cloneSet = `apiVersion: stepwise.dev/v1alpha1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: registry.example.com/web:1.4.0
`

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestValidateCloneSet: the messages are the API server's for the same
// objects (test/integration/cloneset checks the CEL ones on a real server).
func TestValidateCloneSet(t *testing.T) {
	v, err := Shipped(stepwisev1.GroupVersion.WithKind("CloneSet"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		doc  string
		want []string // substrings of the error; none for a valid object
	}{
		{name: "valid", doc: cloneSet},
		{name: "valid_with_namespace", doc: strings.Replace(cloneSet, "name: web\n", "name: web\n  namespace: shop\n", 1)},
		{
			name: "typo_in_spec_is_an_unknown_field",
			doc:  strings.Replace(cloneSet, "replicas: 3", "replica: 3", 1),
			want: []string{`strict decoding error: unknown field "spec.replica"`},
		},
		{
			// The Pod template's spec is kept whole (preserve-unknown-fields)
			// by the CRD, as by the API server: only Stepwise's own fields.
			name: "typo_in_the_update_strategy_is_an_unknown_field",
			doc:  cloneSet + "  updateStrategy:\n    maxUnavilable: 1\n",
			want: []string{`unknown field "spec.updateStrategy.maxUnavilable"`},
		},
		{
			name: "cel_rule_names_the_field",
			doc:  cloneSet + "  updateStrategy:\n    partition: 150%\n",
			want: []string{`CloneSet.stepwise.dev "web" is invalid`, "spec.updateStrategy.partition: Invalid value: ", "spec.updateStrategy.partition must be a non-negative"},
		},
		{
			name: "cel_rule_on_a_refused_openkruise_field",
			doc:  cloneSet + "  volumeClaimTemplates: []\n",
			want: []string{"spec.volumeClaimTemplates: Invalid value: ", "spec.volumeClaimTemplates is not supported by stepwise.dev"},
		},
		{
			name: "wrong_type",
			doc:  strings.Replace(cloneSet, "replicas: 3", "replicas: three", 1),
			want: []string{`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer`},
		},
		{
			name: "enum",
			doc:  cloneSet + "  updateStrategy:\n    type: InPlace\n",
			want: []string{`spec.updateStrategy.type: Unsupported value: "InPlace"`},
		},
		{
			name: "no_name",
			doc:  strings.Replace(cloneSet, "  name: web\n", "  labels: {a: b}\n", 1),
			want: []string{"metadata.name: Required value"},
		},
		{
			name: "bad_name",
			doc:  strings.Replace(cloneSet, "name: web\n", "name: Web_1\n", 1),
			want: []string{`metadata.name: Invalid value: "Web_1"`},
		},
		{
			name: "other_kind",
			doc:  strings.Replace(cloneSet, "kind: CloneSet", "kind: Rollout", 1),
			want: []string{"Rollout (stepwise.dev/v1alpha1) is not a CloneSet (stepwise.dev/v1alpha1)"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := v.Validate(context.Background(), parse(t, c.doc))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("valid object refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid object accepted; want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, w)
				}
			}
		})
	}
}

// TestValidateDefaults: the object comes back defaulted, as the API server
// stores it, so that what plan reads is what the controller would read.
func TestValidateDefaults(t *testing.T) {
	v, err := Shipped(stepwisev1.GroupVersion.WithKind("CloneSet"))
	if err != nil {
		t.Fatal(err)
	}
	u := parse(t, cloneSet+"  updateStrategy: {}\n")
	if err := v.Validate(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if typ, _, _ := unstructured.NestedString(u.Object, "spec", "updateStrategy", "type"); typ != "ReCreate" {
		t.Errorf("spec.updateStrategy.type = %q after defaulting, want ReCreate", typ)
	}
}

// TestExamplesValidate: the examples a user copies pass, so the offline
// check is not stricter than the API server that accepts them in the
// examples' own tests.
func TestExamplesValidate(t *testing.T) {
	for _, file := range []string{"../../examples/rollout/cloneset.yaml", "../../examples/rollout/rollout.yaml", "../../examples/basic/cloneset.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		u := parse(t, string(data))
		v, err := Shipped(u.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Validate(context.Background(), u); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
}
