package cli

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GitOpsOwner says which GitOps tool applies obj, from the marks each
// tool leaves on what it applies: Flux's owner labels, Argo CD's tracking
// annotation or label, or their field managers. Empty when there is none.
// A change made beside git is undone at the tool's next sync (Flux's
// interval, Argo CD's self-heal), and a template put back by git starts
// the rollout of what git holds again, so set image and undo refuse such
// objects unless told otherwise.
func GitOpsOwner(obj metav1.Object) string {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	for _, f := range []struct{ group, kind string }{
		{"kustomize.toolkit.fluxcd.io", "Kustomization"},
		{"helm.toolkit.fluxcd.io", "HelmRelease"},
	} {
		if name := labels[f.group+"/name"]; name != "" {
			return fmt.Sprintf("Flux %s %s (label %s/name)", f.kind, qualified(labels[f.group+"/namespace"], name), f.group)
		}
	}
	if id := annotations["argocd.argoproj.io/tracking-id"]; id != "" {
		app, _, _ := strings.Cut(id, ":")
		return fmt.Sprintf("Argo CD Application %s (annotation argocd.argoproj.io/tracking-id)", app)
	}
	if app := labels["argocd.argoproj.io/instance"]; app != "" {
		return fmt.Sprintf("Argo CD Application %s (label argocd.argoproj.io/instance)", app)
	}
	for _, m := range obj.GetManagedFields() {
		switch m.Manager {
		case "kustomize-controller", "helm-controller":
			return fmt.Sprintf("Flux (field manager %s)", m.Manager)
		case "argocd-controller", "argocd-application-controller":
			return fmt.Sprintf("Argo CD (field manager %s)", m.Manager)
		}
	}
	return ""
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// GitOpsError refuses to change an object that a GitOps tool applies.
type GitOpsError struct {
	// What is the object, as "cloneset shop/web".
	What  string
	Owner string
	// Instead says what to do in git.
	Instead string
}

func (e *GitOpsError) Error() string {
	return fmt.Sprintf("%s is applied by %s: %s; git would undo this change at its next sync (--ignore-gitops makes it anyway)",
		e.What, e.Owner, e.Instead)
}
