package apitest

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// createManager creates a manager Deployment labelled as config/default
// and the chart label it, with extra labels.
func createManager(t *testing.T, ns, image string, labels map[string]string) {
	t.Helper()
	selector := map[string]string{"app.kubernetes.io/name": "stepwise", "app.kubernetes.io/component": "manager"}
	all := map[string]string{}
	for k, v := range selector {
		all[k] = v
	}
	for k, v := range labels {
		all[k] = v
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stepwise-manager", Labels: all},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: image}}},
			},
		},
	}
	if err := env.client.Create(t.Context(), d); err != nil {
		t.Fatalf("creating the manager Deployment: %v", err)
	}
}

func TestVersion(t *testing.T) {
	ns := newNamespace(t)
	createManager(t, ns, "ghcr.io/stepwise-dev/stepwise@sha256:0123", map[string]string{"app.kubernetes.io/version": "v0.2.0"})
	opts := commands.Options{Version: "v0.2.0"}

	res := run(t, ns, opts, "version", "--manager-namespace", ns)
	lines := strings.Split(res.stdout, "\n")
	if res.code != commands.ExitOK || !strings.HasPrefix(lines[0], "Plugin:   v0.2.0 (go") ||
		lines[1] != "Manager:  v0.2.0 ("+ns+"/stepwise-manager, image ghcr.io/stepwise-dev/stepwise@sha256:0123, 0/1 ready)" {
		t.Errorf("version (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}

	other := newNamespace(t)
	res = run(t, ns, opts, "version", "--manager-namespace", other)
	if res.code != commands.ExitOK || !strings.Contains(res.stdout, "Manager:  not found (no Deployment labelled "+cli.ManagerSelector+" in namespace "+other+")") {
		t.Errorf("version without a manager (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}

	// An older manager, found in every namespace.
	createManager(t, other, "ghcr.io/stepwise-dev/stepwise:v0.1.0", nil)
	res = run(t, ns, opts, "version")
	if res.code != commands.ExitOK || !strings.Contains(res.stdout, "Manager:  v0.1.0 ("+other+"/stepwise-manager, image ghcr.io/stepwise-dev/stepwise:v0.1.0, 0/1 ready)\n"+
		"Warning:  the plugin is v0.2.0 and the manager v0.1.0") {
		t.Errorf("version across namespaces (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}

	res = run(t, ns, opts, "version", "--client")
	if res.code != commands.ExitOK || strings.Contains(res.stdout, "Manager") {
		t.Errorf("version --client asked the cluster (exit %d):\n%s", res.code, res.stdout)
	}
}

// TestVersionWithNamespacedRights: a user who may not list Deployments
// cluster-wide still gets the manager's version from stepwise-system,
// where config/default installs it.
func TestVersionWithNamespacedRights(t *testing.T) {
	ctx := t.Context()
	system := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cli.DefaultManagerNamespace}}
	if err := env.client.Create(ctx, system); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	createManager(t, cli.DefaultManagerNamespace, "ghcr.io/stepwise-dev/stepwise:v0.2.0", nil)
	t.Cleanup(func() {
		_ = env.client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: cli.DefaultManagerNamespace, Name: "stepwise-manager"}})
	})
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: cli.DefaultManagerNamespace, Name: "version-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: cli.DefaultManagerNamespace, Name: "version-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "version-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "team", APIGroup: "rbac.authorization.k8s.io"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := userKubeconfig(t, "team")
	res := runExact(t, commands.Options{Version: "v0.2.0"}, "version", "--kubeconfig", kubeconfig)
	if res.code != commands.ExitOK || !strings.Contains(res.stdout, "Manager:  v0.2.0 ("+cli.DefaultManagerNamespace+"/stepwise-manager") {
		t.Errorf("version with rights in %s only (exit %d):\n%s%s", cli.DefaultManagerNamespace, res.code, res.stdout, res.stderr)
	}
	// Without any right there, the error names where it looked; the
	// plugin's own version is printed all the same.
	res = runExact(t, commands.Options{Version: "v0.2.0"}, "version", "--kubeconfig", userKubeconfig(t, "nobody"))
	if res.code != commands.ExitError || !strings.HasPrefix(res.stdout, "Plugin:   v0.2.0") ||
		!strings.Contains(res.stderr, "looking for the manager Deployment ("+cli.ManagerSelector+") in namespace "+cli.DefaultManagerNamespace) {
		t.Errorf("version without rights (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}
}
