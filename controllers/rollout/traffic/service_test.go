package traffic

import (
	"maps"
	"testing"
)

const key = "stepwise.dev/revision-hash"

func TestChangeService(t *testing.T) {
	git := map[string]string{"app": "web"}
	pinned := map[string]string{"app": "web", key: "aaa"}
	cases := []struct {
		name    string
		live    map[string]string
		value   string
		owned   bool
		want    map[string]string
		release bool
	}{
		{"a release pins git's selector to the stable revision", git, "aaa", false, pinned, false},
		{"already pinned: nothing to write", pinned, "aaa", true, nil, false},
		{"git re-applied mid-release: the key goes back", git, "aaa", false, pinned, false},
		{"promoted mid-release: the key moves", pinned, "bbb", true, map[string]string{"app": "web", key: "bbb"}, false},
		{"at rest Stepwise takes its key out of the selector it owns, and lets go", pinned, "", true, git, true},
		{"at rest with git's selector still owned by Stepwise: let go", git, "", true, nil, true},
		{"at rest with git's selector owned by git: nothing", git, "", false, nil, false},
		{"a key that git wrote itself is git's", pinned, "", false, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.live)
			got := ChangeService(tc.live, key, tc.value, tc.owned)
			if !maps.Equal(got.Selector, tc.want) || (got.Selector == nil) != (tc.want == nil) || got.Release != tc.release {
				t.Fatalf("ChangeService = %v release %v; want %v release %v", got.Selector, got.Release, tc.want, tc.release)
			}
			if !maps.Equal(tc.live, before) {
				t.Fatal("ChangeService changed its input")
			}
		})
	}
}

func TestSelectorChanged(t *testing.T) {
	cases := []struct {
		name string
		live map[string]string
		last string
		want bool
	}{
		{"nothing set by Stepwise", map[string]string{"app": "web"}, "", false},
		{"as Stepwise set it", map[string]string{"app": "web", key: "aaa"}, "aaa", false},
		{"the key dropped by a re-apply of git's Service", map[string]string{"app": "web"}, "aaa", true},
		{"the key set to another value", map[string]string{"app": "web", key: "zzz"}, "aaa", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SelectorChanged(tc.live, key, tc.last); got != tc.want {
				t.Fatalf("SelectorChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// A canary Service copied from the stable one keeps the team's labels and
// none of the keys by which Argo CD, Flux, Helm or kubectl would claim it
// as theirs (and prune it, as it is not in git).
func TestWithoutTracking(t *testing.T) {
	cases := []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{"nil", nil, nil},
		{"the team's labels stay", map[string]string{"app": "web", "team": "shop", "app.kubernetes.io/name": "web"}, map[string]string{"app": "web", "team": "shop", "app.kubernetes.io/name": "web"}},
		{"Argo CD's tracking label", map[string]string{"app": "web", "app.kubernetes.io/instance": "shop-prod"}, map[string]string{"app": "web"}},
		{"Argo CD's annotations", map[string]string{"argocd.argoproj.io/tracking-id": "shop:/Service:shop/web", "argocd.argoproj.io/sync-options": "Prune=false", "app": "web"}, map[string]string{"app": "web"}},
		{"Flux Kustomization labels", map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system", "app": "web"}, map[string]string{"app": "web"}},
		{"Flux HelmRelease labels", map[string]string{"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "shop"}, nil},
		{"Helm's release annotations and managed-by label", map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "shop", "app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "web-1.0.0"}, map[string]string{"helm.sh/chart": "web-1.0.0"}},
		{"kubectl's last-applied configuration", map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "app": "web"}, map[string]string{"app": "web"}},
		{"a look-alike key of the team's own stays", map[string]string{"example.com/argocd.argoproj.io": "x"}, map[string]string{"example.com/argocd.argoproj.io": "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.in)
			got := WithoutTracking(tc.in)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("WithoutTracking = %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.in, before) {
				t.Fatal("WithoutTracking changed its input")
			}
		})
	}
}
