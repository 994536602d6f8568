package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stepwise-dev/stepwise/config/rbac"
)

// A manager that watches some namespaces is usually granted Roles in them
// (the Helm chart's rbac.namespaced) rather than the ClusterRole, written
// by whoever installs it. If a Role is missing, the informers of that
// namespace are refused their list and watch, retry forever, and the
// manager waits two minutes for caches that never sync, saying only which
// kind timed out. So before it starts, the manager asks the API server
// what it may do in each watched namespace and compares it with the rules
// it was generated with (config/rbac/role.yaml).

// accessTimeout bounds the reviews at start.
const accessTimeout = 30 * time.Second

// verifyAccess runs checkAccess for the watched namespaces. A missing list
// or watch stops the manager here, with every missing rule named; other
// missing verbs are logged, since only the features that use them fail
// (with a 403 the Rollout or CloneSet reports), such as the Secrets rule
// that docs/security.md shows how to drop.
func verifyAccess(mgr ctrl.Manager, cfg *rest.Config, namespaces []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), accessTimeout)
	defer cancel()
	report, err := checkAccess(ctx, cfg, mgr.GetRESTMapper(), namespaces)
	switch {
	case err != nil:
		return err
	case report.fatal():
		return fmt.Errorf("the manager may not list and watch what it must in the namespaces it watches (--%s=%s); missing: %s. "+
			"Grant its ServiceAccount the rules of ClusterRole stepwise-manager (config/rbac/role.yaml) in each of them: "+
			"a Role and RoleBinding per namespace (the Helm chart's rbac.namespaced=true), or the ClusterRoleBinding",
			WatchNamespacesFlag, strings.Join(namespaces, ","), report)
	case len(report) > 0:
		mgr.GetLogger().Info("the manager lacks some of its rules in the namespaces it watches; what needs them will fail with 403", "missing", report.String())
	}
	return nil
}

// need is one verb on one resource (resource/subresource) the manager's
// rules grant.
type need struct {
	group, resource, verb string
}

func (n need) String() string {
	if n.group == "" {
		return n.resource
	}
	return n.group + "/" + n.resource
}

// cacheNeed is a verb an informer needs: without it the cache never syncs.
func (n need) cacheNeed() bool { return n.verb == "list" || n.verb == "watch" }

// needsOf flattens rules into needs, in their order.
func needsOf(rules []rbacv1.PolicyRule) []need {
	var out []need
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, need{group: g, resource: res, verb: v})
				}
			}
		}
	}
	return out
}

// uncovered returns the needs that no granted rule covers, as RBAC matches
// them: "*" for any group, resource or verb, "*/sub" for a subresource of
// any resource. A rule limited to resourceNames covers no need: the
// manager reads and writes objects by whatever name its users give.
func uncovered(needs []need, granted []authorizationv1.ResourceRule) []need {
	var out []need
	for _, n := range needs {
		if !slices.ContainsFunc(granted, func(r authorizationv1.ResourceRule) bool { return covers(r, n) }) {
			out = append(out, n)
		}
	}
	return out
}

func covers(r authorizationv1.ResourceRule, n need) bool {
	if len(r.ResourceNames) > 0 {
		return false
	}
	anyOr := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	if !anyOr(r.APIGroups, n.group) || !anyOr(r.Verbs, n.verb) {
		return false
	}
	if anyOr(r.Resources, n.resource) {
		return true
	}
	_, sub, ok := strings.Cut(n.resource, "/")
	return ok && slices.Contains(r.Resources, "*/"+sub)
}

// accessReport is what checkAccess found missing, by namespace ("" for a
// cluster-scoped resource).
type accessReport map[string][]need

// fatal reports whether a missing need stops the cache from syncing.
func (r accessReport) fatal() bool {
	for _, needs := range r {
		if slices.ContainsFunc(needs, need.cacheNeed) {
			return true
		}
	}
	return false
}

// String lists, per namespace, each resource with the verbs missing on it.
func (r accessReport) String() string {
	namespaces := make([]string, 0, len(r))
	for ns := range r {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	var parts []string
	for _, ns := range namespaces {
		verbs := map[string][]string{}
		var resources []string
		for _, n := range r[ns] {
			if _, ok := verbs[n.String()]; !ok {
				resources = append(resources, n.String())
			}
			verbs[n.String()] = append(verbs[n.String()], n.verb)
		}
		slices.Sort(resources)
		var each []string
		for _, res := range resources {
			v := verbs[res]
			slices.Sort(v)
			each = append(each, fmt.Sprintf("%s (%s)", res, strings.Join(v, ", ")))
		}
		where := "namespace " + ns
		if ns == "" {
			where = "cluster-wide"
		}
		parts = append(parts, where+": "+strings.Join(each, ", "))
	}
	return strings.Join(parts, "; ")
}

// checkAccess asks the API server, as the manager, which of its generated
// rules it lacks in each of namespaces. One SelfSubjectRulesReview per
// namespace answers it; when an authorizer cannot list its rules (the
// review says incomplete), each need the review does not show is asked
// again with a SelfSubjectAccessReview. Both reviews are allowed to every
// authenticated user. A resource the API server does not serve (an
// OpenKruise or Gateway API CRD not installed) is not watched either, so
// it is left out; a cluster-scoped one is asked once, cluster-wide.
func checkAccess(ctx context.Context, cfg *rest.Config, mapper apimeta.RESTMapper, namespaces []string) (accessReport, error) {
	rules, err := rbac.ManagerRules()
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("checking the manager's access: %w", err)
	}
	var namespaced, clusterScoped []need
	for _, n := range needsOf(rules) {
		served, cluster, err := scopeOf(mapper, n)
		switch {
		case err != nil:
			return nil, err
		case !served:
		case cluster:
			clusterScoped = append(clusterScoped, n)
		default:
			namespaced = append(namespaced, n)
		}
	}
	report := accessReport{}
	for _, ns := range namespaces {
		review, err := authz.SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking the API server what the manager may do in namespace %s: %w", ns, err)
		}
		missing := uncovered(namespaced, review.Status.ResourceRules)
		if review.Status.Incomplete {
			if missing, err = denied(ctx, authz, ns, missing); err != nil {
				return nil, err
			}
		}
		if len(missing) > 0 {
			report[ns] = missing
		}
	}
	missing, err := denied(ctx, authz, "", clusterScoped)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		report[""] = missing
	}
	return report, nil
}

// scopeOf tells whether the API server serves n's resource, and whether it
// is cluster-scoped.
func scopeOf(mapper apimeta.RESTMapper, n need) (served, cluster bool, err error) {
	resource, _, _ := strings.Cut(n.resource, "/")
	gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: n.group, Resource: resource})
	if apimeta.IsNoMatchError(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("looking up %s: %w", n, err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, false, fmt.Errorf("looking up %s: %w", gvk, err)
	}
	return true, mapping.Scope.Name() == apimeta.RESTScopeNameRoot, nil
}

// denied asks a SelfSubjectAccessReview for each need in namespace and
// returns those refused.
func denied(ctx context.Context, authz authorizationclient.AuthorizationV1Interface, namespace string, needs []need) ([]need, error) {
	var out []need
	for _, n := range needs {
		resource, sub, _ := strings.Cut(n.resource, "/")
		review, err := authz.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: n.verb, Group: n.group, Resource: resource, Subresource: sub,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking the API server whether the manager may %s %s: %w", n.verb, n, err)
		}
		if !review.Status.Allowed {
			out = append(out, n)
		}
	}
	return out, nil
}
