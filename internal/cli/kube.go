package cli

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// FieldManager names kubectl-stepwise in managedFields, so that people can
// tell its writes from the controller's and from GitOps'.
const FieldManager = "kubectl-stepwise"

// RolloutResource is fixed: the plugin ships with the API, so it needs no
// discovery round trip to find it.
func RolloutResource() schema.GroupVersionResource {
	return stepwisev1.GroupVersion.WithResource("rollouts")
}

// CloneSetResource is the stepwise.dev CloneSet.
func CloneSetResource() schema.GroupVersionResource {
	return stepwisev1.GroupVersion.WithResource("clonesets")
}

// WorkloadResource maps a Rollout's workloadRef to its resource. The CRD
// admits exactly these three kinds (a CEL rule on spec.workloadRef), so a
// static table is enough and avoids discovery, which would cost a round trip
// per group and a writable cache directory.
func WorkloadResource(ref stepwisev1.WorkloadReference) (schema.GroupVersionResource, error) {
	switch {
	case ref.APIVersion == "stepwise.dev/v1alpha1" && ref.Kind == "CloneSet":
		return CloneSetResource(), nil
	case ref.APIVersion == "apps.kruise.io/v1alpha1" && ref.Kind == "CloneSet":
		return schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "clonesets"}, nil
	case ref.APIVersion == "apps/v1" && ref.Kind == "StatefulSet":
		return schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("workload %s %s: kind not supported by this plugin", ref.APIVersion, ref.Kind)
}

// RolloutFromUnstructured decodes through JSON rather than the reflection
// converter, so that custom JSON types (Decimal thresholds) decode exactly as
// the API server encoded them.
func RolloutFromUnstructured(u *unstructured.Unstructured) (*stepwisev1.Rollout, error) {
	r := &stepwisev1.Rollout{}
	if err := fromUnstructured(u, r); err != nil {
		return nil, fmt.Errorf("decoding rollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return r, nil
}

// CloneSetFromUnstructured decodes a stepwise.dev CloneSet.
func CloneSetFromUnstructured(u *unstructured.Unstructured) (*stepwisev1.CloneSet, error) {
	cs := &stepwisev1.CloneSet{}
	if err := fromUnstructured(u, cs); err != nil {
		return nil, fmt.Errorf("decoding cloneset %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return cs, nil
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

// GetRollout reads one Rollout. A missing Rollout gives the API's NotFound
// error, which names the resource and is clear enough as it is.
func GetRollout(ctx context.Context, dyn dynamic.Interface, namespace, name string) (*unstructured.Unstructured, *stepwisev1.Rollout, error) {
	u, err := dyn.Resource(RolloutResource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reading rollout %s/%s: %w", namespace, name, err)
	}
	r, err := RolloutFromUnstructured(u)
	if err != nil {
		return nil, nil, err
	}
	return u, r, nil
}

// GetWorkload reads the workload a Rollout drives.
func GetWorkload(ctx context.Context, dyn dynamic.Interface, namespace string, ref stepwisev1.WorkloadReference) (*Workload, error) {
	gvr, err := WorkloadResource(ref)
	if err != nil {
		return nil, err
	}
	u, err := dyn.Resource(gvr).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	}
	return WorkloadFromUnstructured(u)
}

// GetCloneSet reads a stepwise.dev CloneSet.
func GetCloneSet(ctx context.Context, dyn dynamic.Interface, namespace, name string) (*stepwisev1.CloneSet, error) {
	u, err := dyn.Resource(CloneSetResource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading cloneset %s/%s: %w", namespace, name, err)
	}
	return CloneSetFromUnstructured(u)
}
