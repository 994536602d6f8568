package config_test

import (
	"context"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
)

// warnings keeps the API server's warnings (deprecated fields, Pod
// Security violations), which kubectl prints and goes on.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// TestDefaultAppliesToAnAPIServer creates every rendered object, in order,
// on a real kube-apiserver (envtest, no CRDs preinstalled): what `kubectl
// apply -k config/default` does. Strict field validation rejects unknown
// fields. The namespace enforces the restricted Pod Security level, which
// the API server checks on a Deployment's Pod template with a warning only:
// a warning here is a manager Pod that would be refused later.
func TestDefaultAppliesToAnAPIServer(t *testing.T) {
	applyToAPIServer(t, render(t))
}

// startAPIServer starts an envtest API server for the test, with a client
// whose warnings w keeps.
func startAPIServer(t *testing.T) (*rest.Config, client.Client, *warnings) {
	t.Helper()
	cfg := envtestenv.StartBareForTest(t)
	w := &warnings{}
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c, w
}

// applyToAPIServer creates objs in order on a fresh envtest API server with
// strict field validation, fails on any warning, then checks what the
// manager's ServiceAccount may do and that the CRDs are served.
func applyToAPIServer(t *testing.T, objs []object) {
	t.Helper()
	_, c, w := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createObjects(ctx, t, c, w, objs)
	checkManagerAccess(ctx, t, c)
	waitForCRDs(ctx, t, c, objs)
}

// createObjects creates objs in order with strict field validation and
// fails on any warning.
func createObjects(ctx context.Context, t *testing.T, c client.Client, w *warnings, objs []object) {
	t.Helper()
	for _, o := range objs {
		u := o.u.DeepCopy()
		if err := c.Create(ctx, u, client.FieldValidation("Strict"), client.FieldOwner("config-test")); err != nil {
			t.Fatalf("creating %s: %v", o.key(), err)
		}
		for _, text := range w.take() {
			t.Errorf("creating %s: API server warns: %s", o.key(), text)
		}
	}
}

// waitForCRDs waits until the CRDs among objs are served, or the manager's
// informers would never sync.
func waitForCRDs(ctx context.Context, t *testing.T, c client.Client, objs []object) {
	t.Helper()
	for _, o := range objs {
		if o.u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: o.u.GetName()}, &crd); err != nil {
				t.Fatal(err)
			}
			if established(&crd) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not Established: %+v", crd.Name, crd.Status.Conditions)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// accessCase is one request of the manager's ServiceAccount, and whether
// the rendered RBAC must allow it.
type accessCase struct {
	verb, group, resource, subresource, namespace string
	allowed                                       bool
}

// managerAccess is what the controllers, the leader election and the
// metrics filter do (allowed), and a few neighbours they must not be able
// to do.
var managerAccess = []accessCase{
	{verb: "list", resource: "pods", namespace: "team-a", allowed: true},
	{verb: "patch", resource: "pods", namespace: "team-a", allowed: true},
	{verb: "update", resource: "pods", namespace: "team-a"},
	{verb: "patch", resource: "pods", subresource: "status", namespace: "team-a", allowed: true},
	{verb: "update", resource: "pods", subresource: "status", namespace: "team-a"},
	{verb: "get", resource: "secrets", namespace: "team-a", allowed: true},
	{verb: "list", resource: "secrets", namespace: "team-a"},
	{verb: "watch", resource: "secrets", namespace: "team-a"},
	{verb: "update", group: "apps", resource: "controllerrevisions", namespace: "team-a", allowed: true},
	{verb: "patch", group: "apps", resource: "statefulsets", namespace: "team-a", allowed: true},
	{verb: "update", group: "apps", resource: "statefulsets", namespace: "team-a"},
	{verb: "get", group: "stepwise.dev", resource: "clonesets", namespace: "team-a", allowed: true},
	{verb: "update", group: "stepwise.dev", resource: "clonesets", namespace: "team-a"},
	{verb: "patch", group: "stepwise.dev", resource: "clonesets", namespace: "team-a"},
	{verb: "update", group: "stepwise.dev", resource: "clonesets", subresource: "finalizers", namespace: "team-a", allowed: true},
	{verb: "patch", group: "stepwise.dev", resource: "rollouts", subresource: "status", namespace: "team-a", allowed: true},
	{verb: "update", group: "stepwise.dev", resource: "rollouts", subresource: "status", namespace: "team-a"},
	{verb: "create", group: "events.k8s.io", resource: "events", namespace: "team-a", allowed: true},
	{verb: "create", resource: "events", namespace: "team-a"},
	{verb: "create", resource: "events", namespace: namespace, allowed: true},
	{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, allowed: true},
	{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
	{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "team-a"},
	{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", allowed: true},
	{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", allowed: true},
}

// checkManagerAccess asks the API server's authorizer about every
// managerAccess case for the manager's ServiceAccount.
func checkManagerAccess(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	for _, tc := range managerAccess {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + namespace + ":" + managerName,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.subresource, Namespace: tc.namespace,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s %s/%s/%s in %q: allowed = %v, want %v (%s)", tc.verb, tc.group, tc.resource, tc.subresource, tc.namespace, sar.Status.Allowed, tc.allowed, sar.Status.Reason)
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
