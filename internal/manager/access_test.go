package manager

import (
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/stepwise-dev/stepwise/config/rbac"
)

// The reviewed rules cover a need as RBAC matches it.
func TestUncovered(t *testing.T) {
	pods := need{resource: "pods", verb: "list"}
	podStatus := need{resource: "pods/status", verb: "patch"}
	rollouts := need{group: "stepwise.dev", resource: "rollouts", verb: "watch"}
	rule := func(groups, resources, verbs []string) authorizationv1.ResourceRule {
		return authorizationv1.ResourceRule{APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	all := []string{"*"}
	for _, tt := range []struct {
		name    string
		granted []authorizationv1.ResourceRule
		want    []need
	}{
		{"nothing granted", nil, []need{pods, podStatus, rollouts}},
		{"each granted by name", []authorizationv1.ResourceRule{
			rule([]string{""}, []string{"pods", "pods/status"}, []string{"list", "patch"}),
			rule([]string{"stepwise.dev"}, []string{"rollouts"}, []string{"get", "watch"}),
		}, nil},
		{"cluster-admin's wildcards", []authorizationv1.ResourceRule{rule(all, all, all)}, nil},
		{"a subresource of any resource", []authorizationv1.ResourceRule{
			rule([]string{""}, []string{"pods", "*/status"}, []string{"list", "patch"}),
			rule([]string{"stepwise.dev"}, all, all),
		}, nil},
		{"the resource does not grant its subresource", []authorizationv1.ResourceRule{
			rule([]string{""}, []string{"pods"}, all),
			rule([]string{"stepwise.dev"}, all, all),
		}, []need{podStatus}},
		{"another group's resource of that name", []authorizationv1.ResourceRule{
			rule([]string{"", "example.com"}, []string{"pods", "pods/status", "rollouts"}, all),
		}, []need{rollouts}},
		{"a verb short", []authorizationv1.ResourceRule{
			rule([]string{""}, []string{"pods", "pods/status"}, []string{"get", "patch"}),
			rule([]string{"stepwise.dev"}, all, all),
		}, []need{pods}},
		{"limited to some names", []authorizationv1.ResourceRule{
			{APIGroups: all, Resources: all, Verbs: all, ResourceNames: []string{"web"}},
		}, []need{pods, podStatus, rollouts}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := uncovered([]need{pods, podStatus, rollouts}, tt.granted)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("uncovered %v, want %v", got, tt.want)
			}
		})
	}
}

// The generated rules, as the manager checks them, are the role's, and the
// rules of ClusterRole stepwise-manager cover them all.
func TestNeedsOfTheGeneratedRole(t *testing.T) {
	rules, err := rbac.ManagerRules()
	if err != nil {
		t.Fatal(err)
	}
	needs := needsOf(rules)
	if len(needs) < 20 {
		t.Fatalf("%d needs from config/rbac/role.yaml: %v", len(needs), needs)
	}
	var granted []authorizationv1.ResourceRule
	for _, r := range rules {
		granted = append(granted, authorizationv1.ResourceRule{APIGroups: r.APIGroups, Resources: r.Resources, Verbs: r.Verbs})
	}
	if missing := uncovered(needs, granted); len(missing) > 0 {
		t.Errorf("the role does not cover its own needs: %v", missing)
	}
	cache := 0
	for _, n := range needs {
		if n.cacheNeed() {
			cache++
		}
	}
	if cache == 0 {
		t.Error("no list or watch among the needs")
	}
}

// The report fails the start only for a list or watch, and names every
// missing verb by namespace and resource.
func TestAccessReport(t *testing.T) {
	writes := accessReport{"team-b": {{group: "stepwise.dev", resource: "rollouts/status", verb: "patch"}, {resource: "secrets", verb: "get"}}}
	if writes.fatal() {
		t.Error("missing writes and gets stop the manager")
	}
	reads := accessReport{
		"team-b": needsOf([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"watch", "list", "get"}}}),
		"":       {{group: "example.com", resource: "widgets", verb: "list"}},
		"team-c": {{group: "stepwise.dev", resource: "rollouts", verb: "list"}},
	}
	if !reads.fatal() {
		t.Error("a missing list or watch does not stop the manager")
	}
	want := "cluster-wide: example.com/widgets (list); namespace team-b: pods (get, list, watch); namespace team-c: stepwise.dev/rollouts (list)"
	if got := reads.String(); got != want {
		t.Errorf("report %q\nwant   %q", got, want)
	}
}
