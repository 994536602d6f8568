// Package v1alpha1 holds the stepwise.dev/v1alpha1 API: CloneSet and Rollout.
//
// CloneSet field names follow OpenKruise's apps.kruise.io/v1alpha1 CloneSet so
// that a manifest ports by changing its apiVersion only.
//
// Every kind's CRD carries Flux's and Argo CD's keep annotations (the
// +kubebuilder:metadata:annotations markers on each root type): deleting a
// CRD deletes every object of its kind, so the GitOps tool that applied it
// must not prune it (docs/gitops.md, "Removing Stepwise: the CRDs stay").
//
// +kubebuilder:object:generate=true
// +groupName=stepwise.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "stepwise.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	// It is apimachinery's, so importing the API pulls in no controller
	// framework.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &CloneSet{}, &CloneSetList{}, &Rollout{}, &RolloutList{},
		&AnalysisTemplate{}, &AnalysisTemplateList{}, &ClusterAnalysisTemplate{}, &ClusterAnalysisTemplateList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
