package apitest

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
)

// storeRevision stores a ControllerRevision of cs, as the CloneSet
// controller does, whose template runs app at version.
func storeRevision(t *testing.T, cs *stepwisev1.CloneSet, name, version string, owned bool) corev1.PodTemplateSpec {
	t.Helper()
	template := *cs.Spec.Template.DeepCopy()
	template.Spec.Containers[0].Image = "example.com/app:" + version
	template.Annotations = map[string]string{"release": version}
	data, err := json.Marshal(template)
	if err != nil {
		t.Fatal(err)
	}
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: name},
		Data:       runtime.RawExtension{Raw: data},
		Revision:   1,
	}
	if owned {
		rev.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cs, stepwisev1.GroupVersion.WithKind("CloneSet"))}
	}
	if err := env.client.Create(t.Context(), rev); err != nil {
		t.Fatalf("storing revision %s: %v", name, err)
	}
	return template
}

// reportRevision writes the CloneSet's status as its controller would
// once it has read its template: generation observed, update revision rev.
func reportRevision(t *testing.T, ns, rev string) {
	t.Helper()
	cs := cloneSetOf(t, ns)
	cs.Status.ObservedGeneration, cs.Status.UpdateRevision = cs.Generation, rev
	if err := env.client.Status().Update(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
}

func TestUndo(t *testing.T) {
	ns := newNamespace(t)
	cs := createCloneSet(t, ns, "app") // the template is revision web-1, app 1.0.0
	stable := storeRevision(t, cs, "web-0", "0.9.0", true)
	createRollout(t, ns)
	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.ObservedGeneration = r.Generation
		r.Status.Phase, r.Status.Reason, r.Status.CurrentStepIndex = stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods, new(int32(1))
		r.Status.StableRevision, r.Status.CanaryRevision = "web-0", "web-1"
		r.Status.PreviousStableRevisions = []string{"web-old"}
	})

	// Mid-rollout: back to the stable revision, which the Rollout takes
	// on its fast path.
	res := run(t, ns, commands.Options{}, "undo", "web")
	want := "cloneset " + ns + "/web: template set back to revision web-0, the stable revision of rollout web: " +
		"the Rollout moves every Pod back to it at once, without steps or analysis.\n"
	if res.code != commands.ExitOK || res.stdout != want {
		t.Fatalf("undo (exit %d):\n%s\nwant:\n%s\nstderr:\n%s", res.code, res.stdout, want, res.stderr)
	}
	got := cloneSetOf(t, ns)
	if images(got) != "app=example.com/app:0.9.0" || got.Spec.Template.Annotations["release"] != "0.9.0" {
		t.Errorf("template after undo: %s, annotations %v; want revision web-0's", images(got), got.Spec.Template.Annotations)
	}
	if !equalTemplates(t, got.Spec.Template, stable) {
		t.Errorf("template after undo differs from revision web-0:\n%+v\n%+v", got.Spec.Template, stable)
	}

	// The controller has not read that template yet: undo waits.
	res = run(t, ns, commands.Options{}, "undo", "web")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, "has a template its controller has not read yet") {
		t.Errorf("undo before the CloneSet observed its template (exit %d): %s", res.code, res.stderr)
	}

	// At the stable revision: the one stable before it, which must still
	// be stored.
	reportRevision(t, ns, "web-0")
	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.Phase, r.Status.Reason, r.Status.CurrentStepIndex, r.Status.CanaryRevision = stepwisev1.RolloutHealthy, stepwisev1.ReasonStable, nil, ""
	})
	res = run(t, ns, commands.Options{}, "undo", "web")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, "reading revision web-old of cloneset "+ns+"/web") ||
		!strings.Contains(res.stderr, "not found") {
		t.Errorf("undo to a revision no longer stored (exit %d): %s", res.code, res.stderr)
	}
	storeRevision(t, cs, "web-old", "0.8.0", true)
	res = run(t, ns, commands.Options{}, "undo", "web")
	want = "cloneset " + ns + "/web: template set back to revision web-old, stable before web-0: " +
		"rollout web rolls it out as a new revision (steps and analysis), unless spec.versionPolicy trusts the downgrade.\n"
	if res.code != commands.ExitOK || res.stdout != want || images(cloneSetOf(t, ns)) != "app=example.com/app:0.8.0" {
		t.Errorf("undo at the stable revision (exit %d):\n%s\nwant:\n%s\nstderr:\n%s", res.code, res.stdout, want, res.stderr)
	}
}

func TestUndoRefusals(t *testing.T) {
	ns := newNamespace(t)
	cs := createCloneSet(t, ns, "app")
	storeRevision(t, cs, "web-0", "0.9.0", false)
	createRollout(t, ns)
	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.Phase, r.Status.StableRevision, r.Status.CanaryRevision = stepwisev1.RolloutAborted, "web-0", "web-1"
	})

	// A revision of the same name that the CloneSet does not own.
	res := run(t, ns, commands.Options{}, "undo", "web")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, "ControllerRevision "+ns+"/web-0 does not belong to cloneset web") {
		t.Errorf("undo to a revision of another owner (exit %d): %s", res.code, res.stderr)
	}

	// Argo CD applies the Rollout: revert in git instead.
	r := rolloutOf(t, ns, "web")
	r.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "shop:stepwise.dev/Rollout:" + ns + "/web"}
	if err := env.client.Update(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	res = run(t, ns, commands.Options{}, "undo", "web")
	want := "error: rollout " + ns + "/web is applied by Argo CD Application shop (annotation argocd.argoproj.io/tracking-id): " +
		"revert the release's commit in git, and the Rollout takes the same fast path; git would undo this change at its next sync (--ignore-gitops makes it anyway)\n"
	if res.code != commands.ExitError || res.stderr != want {
		t.Errorf("undo of an Argo CD Rollout (exit %d):\n%s\nwant:\n%s", res.code, res.stderr, want)
	}
	if images(cloneSetOf(t, ns)) != "app=example.com/app:1.0.0" {
		t.Errorf("a refused undo changed the template: %s", images(cloneSetOf(t, ns)))
	}

	// A StatefulSet has kubectl rollout undo.
	sts := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: rolloutOf(t, ns, "web").Spec}
	sts.Spec.WorkloadRef = stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	if err := env.client.Create(t.Context(), sts); err != nil {
		t.Fatal(err)
	}
	res = run(t, ns, commands.Options{}, "undo", "db")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, "drives StatefulSet db (apps/v1): undo sets back the template of a stepwise.dev CloneSet only") {
		t.Errorf("undo of a StatefulSet's Rollout (exit %d): %s", res.code, res.stderr)
	}
}

func equalTemplates(t *testing.T, a, b corev1.PodTemplateSpec) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
