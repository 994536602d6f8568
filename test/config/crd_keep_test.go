package config_test

import "testing"

// keepAnnotations keep a CRD when the GitOps tool that applied it prunes
// or deletes what it applied: a deleted CRD deletes every object of its
// kind, and the garbage collector then every CloneSet's Pods.
// test/gitops's story 8 deletes an install with real Flux and Argo CD.
var keepAnnotations = map[string]string{
	"kustomize.toolkit.fluxcd.io/prune": "disabled",
	"argocd.argoproj.io/sync-options":   "Prune=false",
}

func TestEveryCRDOutlivesTheGitOpsToolThatAppliedIt(t *testing.T) {
	for install, objs := range map[string][]object{"config/default": render(t), "the chart": renderChart(t, "")} {
		crds := 0
		for _, o := range objs {
			if o.u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			crds++
			for key, want := range keepAnnotations {
				if got := o.u.GetAnnotations()[key]; got != want {
					t.Errorf("%s: %s has annotation %s=%q, want %q (add the marker +kubebuilder:metadata:annotations to its type and run make manifests)", install, o.key(), key, got, want)
				}
			}
		}
		if crds == 0 {
			t.Errorf("%s installs no CRD", install)
		}
	}
}
