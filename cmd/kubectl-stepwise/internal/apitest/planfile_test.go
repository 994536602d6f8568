package apitest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
	"github.com/stepwise-dev/stepwise/internal/crdschema"
)

// TestOfflineValidationMatchesTheAPIServer: what plan -f says of a
// CloneSet file is what the API server says of the same object on a strict
// dry-run create (kubectl apply's default), word for word.
func TestOfflineValidationMatchesTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	base := `apiVersion: stepwise.dev/v1alpha1
kind: CloneSet
metadata:
  name: web
  namespace: ` + ns + `
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
	cases := map[string]string{
		"valid":         base,
		"typo":          strings.Replace(base, "replicas: 3", "replica: 3", 1),
		"wrong type":    strings.Replace(base, "replicas: 3", "replicas: three", 1),
		"cel":           base + "  updateStrategy:\n    partition: 150%\n",
		"cel fieldPath": base + "  volumeClaimTemplates: []\n",
		"enum":          base + "  updateStrategy:\n    type: InPlace\n",
		"two errors":    base + "  updateStrategy:\n    partition: 150%\n    maxUnavailable: -1\n",
	}
	v, err := crdschema.Shipped(stepwisev1.GroupVersion.WithKind("CloneSet"))
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			offline := v.Validate(context.Background(), decode(t, doc))
			_, server := env.dynamic.Resource(cli.CloneSetResource()).Namespace(ns).Create(t.Context(), decode(t, doc),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
			if errString(offline) != errString(server) {
				t.Errorf("offline:\n%s\nAPI server:\n%s", errString(offline), errString(server))
			}
		})
	}
}

// errString is err's message, with the causes of an Invalid error sorted:
// the CEL rules of different fields are evaluated in no fixed order, by
// the API server as offline, so only the set of causes can match.
func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) < 2 {
		return err.Error()
	}
	d := status.Status().Details
	causes := make([]string, 0, len(d.Causes))
	for _, c := range d.Causes {
		causes = append(causes, c.Field+": "+c.Message)
	}
	slices.Sort(causes)
	return fmt.Sprintf("%s %s.%s %q is invalid:\n%s", status.Status().Reason, d.Kind, d.Group, d.Name, strings.Join(causes, "\n"))
}
