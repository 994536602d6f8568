package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// WatchNamespacesFlag is the manager flag that fills Options.Namespaces.
const WatchNamespacesFlag = "watch-namespaces"

// checkNamespaces returns namespaces without repeats, in their order, or
// an error naming the first entry that is not a namespace name.
func checkNamespaces(namespaces []string) ([]string, error) {
	var out []string
	for _, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("--%s: %q is not a namespace name: %s", WatchNamespacesFlag, ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// secretsAndConfigMaps are the kinds the controllers read around the cache
// by a name a Rollout gives (a metric's token, its CA, a webhook's URL):
// the reads scopedReader keeps inside the watched namespaces.
var secretsAndConfigMaps = []schema.GroupKind{{Kind: "Secret"}, {Kind: "ConfigMap"}}

// scopedReader refuses to read a Secret or ConfigMap outside namespaces,
// before any request: a manager told to watch some namespaces reads no
// Secret of another, whatever its RBAC would allow (a ClusterRole with
// --watch-namespaces). The controllers only ever name Secrets of the
// Rollout's own namespace, so this holds what they do today against a
// change that forgets it. Every other read goes through unchanged: the
// cache already holds only the watched namespaces.
type scopedReader struct {
	client.Reader
	scope readScope
}

// scopedClient is scopedReader's rule on a client's reads; its writes go
// through unchanged.
type scopedClient struct {
	client.Client
	scope readScope
}

// readScope is the rule: Secrets and ConfigMaps in namespaces only (any
// namespace when empty).
type readScope struct {
	namespaces []string
	scheme     *runtime.Scheme
}

func (s readScope) allow(obj runtime.Object, namespace, name string) error {
	if len(s.namespaces) == 0 || slices.Contains(s.namespaces, namespace) {
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return err
	}
	kind := schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}
	if !slices.Contains(secretsAndConfigMaps, kind) {
		return nil
	}
	what := fmt.Sprintf("the %ss of every namespace", kind.Kind)
	switch {
	case name != "":
		what = fmt.Sprintf("%s %s/%s", kind.Kind, namespace, name)
	case namespace != "":
		what = fmt.Sprintf("the %ss of namespace %s", kind.Kind, namespace)
	}
	return fmt.Errorf("reading %s: the manager reads Secrets and ConfigMaps only in the namespaces it watches (--%s=%s)",
		what, WatchNamespacesFlag, strings.Join(s.namespaces, ","))
}

func (r *scopedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.scope.allow(obj, key.Namespace, key.Name); err != nil {
		return err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *scopedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.scope.allow(list, listNamespace(opts), ""); err != nil {
		return err
	}
	return r.Reader.List(ctx, list, opts...)
}

func (c *scopedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.scope.allow(obj, key.Namespace, key.Name); err != nil {
		return err
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *scopedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.scope.allow(list, listNamespace(opts), ""); err != nil {
		return err
	}
	return c.Client.List(ctx, list, opts...)
}

func listNamespace(opts []client.ListOption) string {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	return lo.Namespace
}
