package traffic

import (
	"maps"
	"strings"
)

// ServiceSelector is the selector a Service carries to select the Pods
// whose key label is value: live's own keys (git's) with key set to value,
// or without key when value is "" (at rest).
func ServiceSelector(live map[string]string, key, value string) map[string]string {
	sel := make(map[string]string, len(live)+1)
	for k, v := range live {
		if k != key {
			sel[k] = v
		}
	}
	if value != "" {
		sel[key] = value
	}
	return sel
}

// ServiceChange is what Stepwise writes to the selector of a Service it
// does not own (the stable Service, or a canary Service from git).
type ServiceChange struct {
	// Selector is the whole selector to apply (a Service's selector is an
	// atomic map); nil when the live one is right.
	Selector map[string]string
	// Release gives up Stepwise's ownership of spec.selector once it holds
	// git's keys alone, so that the next apply of git's manifest owns it
	// again without a conflict (kubectl apply --server-side without
	// --force-conflicts included).
	Release bool
}

// ChangeService returns the change that makes a Service select value under
// key. During a release (value set) the key is added to the live selector,
// or corrected. At rest (value "") the key is removed, but only from a
// selector Stepwise owns (owned): a key that git itself wrote is git's,
// and is left alone; and once the selector is git's, Stepwise lets go of
// it.
func ChangeService(live map[string]string, key, value string, owned bool) ServiceChange {
	if value != "" {
		want := ServiceSelector(live, key, value)
		if maps.Equal(live, want) {
			return ServiceChange{}
		}
		return ServiceChange{Selector: want}
	}
	if !owned {
		return ServiceChange{}
	}
	if _, ok := live[key]; ok {
		return ServiceChange{Selector: ServiceSelector(live, key, ""), Release: true}
	}
	return ServiceChange{Release: true}
}

// SelectorChanged reports whether someone else changed a Service's
// selector since Stepwise set it to select last under key: the key is gone
// or holds another value. Nothing Stepwise set ("") cannot be changed.
func SelectorChanged(live map[string]string, key, last string) bool {
	return last != "" && live[key] != last
}

// trackingPrefixes and trackingKeys are the labels and annotations by
// which GitOps tools and Helm recognise the objects they manage: Argo CD's
// tracking label (app.kubernetes.io/instance by default) and annotations
// (argocd.argoproj.io/*), Flux's Kustomization and HelmRelease labels,
// Helm's release annotations and managed-by label, and kubectl's
// last-applied configuration. A canary Service copied from the stable one
// with them would be claimed by the tool, shown as its own, and pruned as
// absent from git.
var (
	trackingPrefixes = []string{"argocd.argoproj.io/", "kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/", "meta.helm.sh/"}
	trackingKeys     = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "kubectl.kubernetes.io/last-applied-configuration"}
)

// WithoutTracking is a copy of a label or annotation map without the keys
// by which GitOps tools and Helm track what they manage; nil when nothing
// is left.
func WithoutTracking(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if isTracking(k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

func isTracking(key string) bool {
	for _, k := range trackingKeys {
		if key == k {
			return true
		}
	}
	for _, p := range trackingPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
