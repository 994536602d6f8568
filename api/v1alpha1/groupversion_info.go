// Package v1alpha1 holds the stepwise.dev/v1alpha1 API: CloneSet and Rollout.
//
// CloneSet field names follow OpenKruise's apps.kruise.io/v1alpha1 CloneSet so
// that a manifest ports by changing its apiVersion only.
//
// +kubebuilder:object:generate=true
// +groupName=stepwise.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "stepwise.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
