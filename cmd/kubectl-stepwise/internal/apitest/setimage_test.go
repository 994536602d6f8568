package apitest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

func cloneSetOf(t *testing.T, ns string) *stepwisev1.CloneSet {
	t.Helper()
	cs := &stepwisev1.CloneSet{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func images(cs *stepwisev1.CloneSet) string {
	var out []string
	for _, c := range cs.Spec.Template.Spec.Containers {
		out = append(out, c.Name+"="+c.Image)
	}
	return strings.Join(out, " ")
}

func TestSetImage(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app", "sidecar")

	res := run(t, ns, commands.Options{}, "set", "image", "cloneset/web", "app=example.com/app:2.0.0")
	if want := "cloneset " + ns + "/web: container app: example.com/app:1.0.0 -> example.com/app:2.0.0\n"; res.code != commands.ExitOK || res.stdout != want {
		t.Fatalf("set image (exit %d):\n%s\nwant:\n%s\nstderr:\n%s", res.code, res.stdout, want, res.stderr)
	}
	cs := cloneSetOf(t, ns)
	if got := images(cs); got != "app=example.com/app:2.0.0 sidecar=example.com/sidecar:1.0.0" {
		t.Errorf("images after set image: %s", got)
	}
	if !managedBy(cs, cli.FieldManager) {
		t.Errorf("no managedFields entry of %s", cli.FieldManager)
	}

	res = run(t, ns, commands.Options{}, "set", "image", "cloneset", "web", "app=example.com/app:2.0.0")
	if res.code != commands.ExitOK || !strings.Contains(res.stdout, "unchanged, every container already runs its image") {
		t.Errorf("set image to the same image (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, ns, commands.Options{}, "set", "image", "cloneset/web", "db=example.com/db:1")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, `cloneset `+ns+`/web has no container "db" (it has app, sidecar)`) {
		t.Errorf("set image of a missing container (exit %d): %s", res.code, res.stderr)
	}
	if got := images(cloneSetOf(t, ns)); got != "app=example.com/app:2.0.0 sidecar=example.com/sidecar:1.0.0" {
		t.Errorf("a refused set image changed the images: %s", got)
	}

	// A Rollout governs it: the output says where to watch the release.
	cs = cloneSetOf(t, ns)
	cs.Status.Rollout = &stepwisev1.CloneSetGovernor{Name: "web", Partition: intstr.FromString("100%")}
	if err := env.client.Status().Update(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	res = run(t, ns, commands.Options{}, "set", "image", "clone/web", "sidecar=example.com/sidecar:1.1.0")
	if res.code != commands.ExitOK || !strings.Contains(res.stdout, "rollout "+ns+"/web rolls it out in steps: kubectl stepwise get rollout web -n "+ns+" --watch") {
		t.Errorf("set image of a governed CloneSet (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// TestSetImageRefusesGitOps: a CloneSet that Flux applies is not changed
// beside git, unless the user insists.
func TestSetImageRefusesGitOps(t *testing.T) {
	ns := newNamespace(t)
	cs := createCloneSet(t, ns, "app")
	cs.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
	if err := env.client.Update(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	res := run(t, ns, commands.Options{}, "set", "image", "cloneset/web", "app=example.com/app:2.0.0")
	want := "error: cloneset " + ns + "/web is applied by Flux Kustomization flux-system/apps (label kustomize.toolkit.fluxcd.io/name): " +
		"change the image in git; git would undo this change at its next sync (--ignore-gitops makes it anyway)\n"
	if res.code != commands.ExitError || res.stderr != want {
		t.Errorf("set image of a Flux CloneSet (exit %d):\n%s\nwant:\n%s", res.code, res.stderr, want)
	}
	if got := images(cloneSetOf(t, ns)); got != "app=example.com/app:1.0.0" {
		t.Errorf("the refused set image changed the image: %s", got)
	}
	res = run(t, ns, commands.Options{}, "set", "image", "cloneset/web", "app=example.com/app:2.0.0", "--ignore-gitops")
	if res.code != commands.ExitOK || images(cloneSetOf(t, ns)) != "app=example.com/app:2.0.0" {
		t.Errorf("set image --ignore-gitops (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}
}
