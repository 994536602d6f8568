package traffic

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// services sets the Services' selectors: the spec's during a release, and
// back to their own at rest for every Service the record names.
func (c *changer) services() {
	c.out.ServicesReady = true
	done := map[string]bool{}
	if tr := c.t.routing(); tr != nil {
		c.gitService(tr.StableService, c.plan.StableSelects, c.t.LastStable, "stable Service %s not found in namespace %s")
		done[tr.StableService] = true
		if tr.CanaryService.Create {
			c.createdService(tr)
		} else {
			c.gitService(tr.CanaryService.Name, c.plan.CanarySelects, c.t.LastCanary,
				"canary Service %s not found in namespace %s (set spec.trafficRouting.canaryService.create for Stepwise to create it)")
		}
		done[tr.CanaryService.Name] = true
	}
	for _, name := range c.recorded().Services {
		if !done[name] {
			c.gitService(name, "", "", "")
		}
	}
}

// gitService makes a Service Stepwise does not own select revision: the
// revision key is added to its selector during a release and, at rest,
// taken out again, but only if the record says this Rollout put it there.
func (c *changer) gitService(name, revision, last, notFound string) {
	ro, key := c.t.Rollout, c.t.LabelKey
	svc := c.w.Services[name]
	value := c.t.labelValue(revision)
	if svc == nil {
		if value != "" {
			c.problem(v1alpha1.ReasonInvalidSpec, notFound, name, ro.Namespace)
		}
		return
	}
	if value != "" && SelectorChanged(svc.Spec.Selector, key, c.t.labelValue(last)) {
		if others := otherManagers(svc.ManagedFields, []string{"spec", "selector"}); len(others) > 0 {
			found := "without " + key
			if v, ok := svc.Spec.Selector[key]; ok {
				found = key + "=" + v
			}
			c.out.Conflicts = append(c.out.Conflicts, fmt.Sprintf("Service %s/%s: spec.selector (%s, Stepwise set %s=%s) by %s",
				svc.Namespace, svc.Name, found, key, c.t.labelValue(last), strings.Join(others, ", ")))
		}
	}
	mine := slices.Contains(c.recorded().Services, name) && c.recorded().SelectorKey == key
	owned := slices.Contains(managersOf(svc.ManagedFields, []string{"spec", "selector"}), FieldManager)
	change := ChangeService(svc.Spec.Selector, key, value, owned && mine)
	if change.Selector != nil {
		c.write(ApplySelector, selectorApply(svc, change.Selector), "the selector of Service "+name)
		c.out.ServicesReady = false
	}
	if change.Release {
		c.write(ReleaseSelector, svc, "the selector of Service "+name)
	}
	_, hasKey := svc.Spec.Selector[key]
	if value != "" || (mine && hasKey) {
		c.keptServices = append(c.keptServices, name)
	}
}

func selectorApply(svc *corev1.Service, selector map[string]string) client.Object {
	sel := map[string]any{}
	for k, v := range selector {
		sel[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": svc.Name, "namespace": svc.Namespace},
		"spec":     map[string]any{"selector": sel},
	}}
}

// createdService creates the canary Service from the stable one (ports,
// selector, labels without GitOps tracking keys), marked as the Rollout's
// and owned by it, when the name is free; keeps its selector at the stable
// Service's own keys plus the revision key (none at rest); and refuses a
// Service of that name that it did not create.
func (c *changer) createdService(tr *v1alpha1.TrafficRouting) {
	ro := c.t.Rollout
	stable := c.w.Services[tr.StableService]
	if stable == nil {
		return
	}
	name := tr.CanaryService.Name
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ro.Namespace, Name: name, Labels: WithoutTracking(stable.Labels),
			Annotations: map[string]string{v1alpha1.CreatedByAnnotation: createdBy(ro)}, OwnerReferences: ownedBy(ro)},
		Spec: corev1.ServiceSpec{
			Selector: ServiceSelector(stable.Spec.Selector, c.t.LabelKey, c.t.labelValue(c.plan.CanarySelects)),
			Type:     corev1.ServiceTypeClusterIP,
		},
	}
	for _, p := range stable.Spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: p.TargetPort})
	}
	current := c.w.Services[name]
	switch {
	case current == nil:
		c.write(Create, svc, "canary Service "+name)
		c.out.ServicesReady = false
	case !CreatedFor(current, ro):
		c.problem(v1alpha1.ReasonObjectNotOwned, "Service %s/%s exists and Stepwise did not create it for this Rollout (it has no %s: %s): "+
			"Stepwise never takes over a Service it did not create; name another spec.trafficRouting.canaryService, or unset create to let Stepwise set only its selector during a release",
			ro.Namespace, name, v1alpha1.CreatedByAnnotation, createdBy(ro))
	case !apiequality.Semantic.DeepEqual(current.Spec.Selector, svc.Spec.Selector) || !samePorts(current.Spec.Ports, svc.Spec.Ports) ||
		!maps.Equal(current.Labels, svc.Labels) || current.Annotations[v1alpha1.CreatedByAnnotation] != createdBy(ro):
		c.write(Apply, svc, "canary Service "+name)
		c.out.ServicesReady = false
	}
}

// createdBy is CreatedByAnnotation's value for ro.
func createdBy(ro *v1alpha1.Rollout) string { return ro.Namespace + "/" + ro.Name }

// CreatedFor reports whether Stepwise created obj for ro: it carries
// CreatedByAnnotation for ro, or, in ro's namespace, ro's controller owner
// reference.
func CreatedFor(obj client.Object, ro *v1alpha1.Rollout) bool {
	if obj.GetAnnotations()[v1alpha1.CreatedByAnnotation] == createdBy(ro) {
		return true
	}
	ref := metav1.GetControllerOf(obj)
	return obj.GetNamespace() == ro.Namespace && ref != nil && ref.UID == ro.UID && ref.Kind == "Rollout"
}

// ownedBy is the owner reference of what Stepwise creates for ro in its
// namespace: the garbage collector deletes it with ro. No
// blockOwnerDeletion, which would need rollouts/finalizers.
func ownedBy(ro *v1alpha1.Rollout) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "Rollout", Name: ro.Name, UID: ro.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
	}}
}

func samePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Port == y.Port && x.TargetPort == y.TargetPort && x.Protocol == y.Protocol
	})
}

// labelValue is the selector value for revision; "" for none.
func (t Target) labelValue(revision string) string {
	if revision == "" {
		return ""
	}
	return t.LabelValue(revision)
}

// otherManagers lists the managers other than FieldManager whose managed
// fields hold path (the main resource only).
func otherManagers(entries []metav1.ManagedFieldsEntry, path []string) []string {
	return slices.DeleteFunc(managersOf(entries, path), func(m string) bool { return m == FieldManager })
}

// managersOf lists the managers whose managed fields hold path (the main
// resource only).
func managersOf(entries []metav1.ManagedFieldsEntry, path []string) []string {
	var names []string
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		if ownsPath(e, path) && !slices.Contains(names, e.Manager) {
			names = append(names, e.Manager)
		}
	}
	slices.Sort(names)
	return names
}

func ownsPath(e metav1.ManagedFieldsEntry, path []string) bool {
	set := &fieldpath.Set{}
	if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
		return false
	}
	p := make(fieldpath.Path, 0, len(path))
	for _, name := range path {
		p = append(p, fieldpath.PathElement{FieldName: ptr.To(name)})
	}
	return set.Has(p)
}
