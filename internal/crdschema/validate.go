package crdschema

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/config/crd"
)

// Validator checks objects of one kind and version against its CRD.
type Validator struct {
	gvk        schema.GroupVersionKind
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	// cel is nil when the schema has no x-kubernetes-validations.
	cel *cel.Validator
	// scale is the scale subresource's paths; nil without one.
	scale *apiextensionsv1.CustomResourceSubresourceScale
}

// Shipped returns the validator of a kind served by the CRDs in config/crd.
func Shipped(gvk schema.GroupVersionKind) (*Validator, error) {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing the shipped CRDs: %w", err)
	}
	for _, name := range files {
		data, err := crd.Bases.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		if c.Spec.Group == gvk.Group && c.Spec.Names.Kind == gvk.Kind {
			return New(&c, gvk.Version)
		}
	}
	return nil, fmt.Errorf("no shipped CRD serves %s", gvk.GroupKind())
}

// New builds the validator of one version of a CRD, as the API server
// builds its handler: the v1 schema converted to the internal one, made
// structural with defaults pruned.
func New(c *apiextensionsv1.CustomResourceDefinition, version string) (*Validator, error) {
	var v1schema *apiextensionsv1.CustomResourceValidation
	var scale *apiextensionsv1.CustomResourceSubresourceScale
	for _, ver := range c.Spec.Versions {
		if ver.Name == version {
			v1schema = ver.Schema
			if ver.Subresources != nil {
				scale = ver.Subresources.Scale
			}
		}
	}
	if v1schema == nil || v1schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("CRD %s has no schema for version %q", c.Name, version)
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of CRD %s: %w", c.Name, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: the schema is not structural: %w", c.Name, err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("CRD %s: pruning defaults: %w", c.Name, err)
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: building the schema validator: %w", c.Name, err)
	}
	return &Validator{
		gvk:        schema.GroupVersionKind{Group: c.Spec.Group, Version: version, Kind: c.Spec.Names.Kind},
		structural: s,
		schema:     sv,
		cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
		scale:      scale,
	}, nil
}

// Validate checks obj as the API server checks a create with strict field
// validation (kubectl's default), and defaults it in place. The error is
// the API server's: a strict decoding error naming unknown fields, or an
// Invalid error listing each field at fault.
func (v *Validator) Validate(ctx context.Context, obj *unstructured.Unstructured) error {
	if gvk := obj.GroupVersionKind(); gvk != v.gvk {
		return fmt.Errorf("%s is not a %s", describe(gvk), describe(v.gvk))
	}
	// Pruning reports the fields the schema does not declare; the API
	// server refuses them under strict field validation, so a typo such as
	// "replica" shows instead of vanishing.
	_, _, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return fmt.Errorf("%s %q: metadata: %w", v.gvk.Kind, obj.GetName(), err)
	}
	unknown := append(metaUnknown, structuralpruning.PruneWithOptions(obj.Object, v.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	if len(unknown) > 0 {
		msgs := make([]string, len(unknown))
		for i, p := range unknown {
			msgs[i] = fmt.Sprintf("unknown field %q", p)
		}
		return fmt.Errorf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
			v.gvk.Kind, v.gvk.Version, v.gvk.Kind, strings.Join(msgs, ", "))
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj.Object, v.structural)
	structuraldefaulting.Default(obj.Object, v.structural)

	// In the API server's order (customresource strategy and validator),
	// so that the same object gives the same message.
	errs := v.validateMeta(obj)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.Object, v.schema)...)
	errs = append(errs, v.validateScale(obj)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, v.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.structural, obj.Object)...)
	if v.cel != nil {
		// CEL rules run only on an object without blocking errors, since a
		// rule would otherwise read a string as a number.
		if blocking(errs) {
			errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj.Object, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(v.gvk.GroupKind(), obj.GetName(), errs)
	}
	return nil
}

// validateMeta checks the name and namespace as the API server does. A file
// in git often has no namespace (the GitOps tool sets it at apply time), so
// a namespace is checked when present, never required.
func (v *Validator) validateMeta(obj *unstructured.Unstructured) field.ErrorList {
	return metavalidation.ValidateObjectMetaAccessor(obj, obj.GetNamespace() != "", metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

// validateScale checks the replicas paths of the scale subresource, as the
// API server does on every write.
func (v *Validator) validateScale(obj *unstructured.Unstructured) field.ErrorList {
	if v.scale == nil {
		return nil
	}
	var errs field.ErrorList
	for _, p := range []string{v.scale.SpecReplicasPath, v.scale.StatusReplicasPath} {
		n, _, err := unstructured.NestedInt64(obj.Object, strings.Split(strings.TrimPrefix(p, "."), ".")...)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(p), n, err.Error()))
		case n < 0:
			errs = append(errs, field.Invalid(field.NewPath(p), n, "should be a non-negative integer"))
		case n > math.MaxInt32:
			errs = append(errs, field.Invalid(field.NewPath(p), n, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
		}
	}
	return errs
}

// blocking reports errors after which the API server skips the CEL rules.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

func describe(gvk schema.GroupVersionKind) string {
	if gvk.Kind == "" {
		return "an object without kind"
	}
	return gvk.Kind + " (" + gvk.GroupVersion().String() + ")"
}
