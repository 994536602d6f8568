package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGitOpsOwner(t *testing.T) {
	cases := map[string]struct {
		meta metav1.ObjectMeta
		want string
	}{
		"none": {metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/instance": "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply"}}}, ""},
		"flux kustomization": {metav1.ObjectMeta{Labels: map[string]string{
			"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
			"Flux Kustomization flux-system/apps (label kustomize.toolkit.fluxcd.io/name)"},
		"flux helmrelease": {metav1.ObjectMeta{Labels: map[string]string{"helm.toolkit.fluxcd.io/name": "web"}},
			"Flux HelmRelease web (label helm.toolkit.fluxcd.io/name)"},
		"argo cd annotation": {metav1.ObjectMeta{Annotations: map[string]string{"argocd.argoproj.io/tracking-id": "shop-web:stepwise.dev/CloneSet:shop/web"}},
			"Argo CD Application shop-web (annotation argocd.argoproj.io/tracking-id)"},
		"argo cd label": {metav1.ObjectMeta{Labels: map[string]string{"argocd.argoproj.io/instance": "shop-web"}},
			"Argo CD Application shop-web (label argocd.argoproj.io/instance)"},
		"flux field manager": {metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-stepwise"}, {Manager: "kustomize-controller"}}},
			"Flux (field manager kustomize-controller)"},
		"argo cd field manager": {metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "argocd-controller"}}},
			"Argo CD (field manager argocd-controller)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := GitOpsOwner(&c.meta); got != c.want {
				t.Errorf("GitOpsOwner = %q, want %q", got, c.want)
			}
		})
	}
	err := &GitOpsError{What: "cloneset shop/web", Owner: "Flux (field manager kustomize-controller)", Instead: "change the image in git"}
	if !strings.Contains(err.Error(), "cloneset shop/web is applied by Flux (field manager kustomize-controller): change the image in git;") ||
		!strings.Contains(err.Error(), "--ignore-gitops") {
		t.Errorf("error: %s", err)
	}
}
