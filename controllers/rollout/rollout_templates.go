package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
)

// templateRecheck is how often a Rollout stalled on a missing template or
// argument looks again: templates and Secrets are read around the cache,
// so their creation is not watched.
const templateRecheck = 30 * time.Second

// +kubebuilder:rbac:groups=stepwise.dev,resources=analysistemplates;clusteranalysistemplates,verbs=get

// resolveAnalysis reads the args' valueFrom sources and the templates spec
// names (those recorded in status for this canary revision first, so that
// a template edited mid-release does not change the release in flight),
// and replaces spec's metrics and args with the resolved ones. A missing
// template, arg or arg source is a stall naming it, and the analysis it is
// for (of, such as "spec.analysis.background"): never a pass.
func (r *Reconciler) resolveAnalysis(ctx context.Context, ro *v1alpha1.Rollout, spec *v1alpha1.AnalysisSpec, of string) error {
	if len(spec.Templates) == 0 && !hasValueFrom(spec.Args) {
		return nil
	}
	args, err := r.argValues(ctx, ro, spec.Args)
	if err != nil {
		return err
	}
	templates, err := r.templates(ctx, ro, spec.Templates)
	if err != nil {
		return err
	}
	resolved, err := stepanalysis.Resolve(spec.Metrics, spec.Templates, templates, args)
	var missing *stepanalysis.MissingError
	switch {
	case errors.As(err, &missing):
		return stallRecheck(v1alpha1.ReasonAnalysisTemplateMissing, of+": "+missing.Error())
	case err != nil:
		return stall(v1alpha1.ReasonInvalidAnalysis, "%s: %v", of, err)
	}
	merged := map[string]string{}
	spec.Metrics = make([]v1alpha1.Metric, 0, len(resolved))
	for _, m := range resolved {
		spec.Metrics = append(spec.Metrics, m.Metric)
		for k, v := range m.Args {
			if _, ok := merged[k]; !ok {
				merged[k] = v
			}
		}
	}
	for k, v := range args {
		merged[k] = v
	}
	spec.Args = v1alpha1.ArgsFromMap(merged)
	spec.Templates = nil
	return nil
}

func stallRecheck(reason, message string) error {
	return &stallError{problem{reason: reason, message: message, terminal: true, requeue: templateRecheck}}
}

func hasValueFrom(args []v1alpha1.AnalysisArg) bool {
	for _, a := range args {
		if a.ValueFrom != nil {
			return true
		}
	}
	return false
}

// argValues reads every arg's value. Secrets are read around the cache, as
// bearer tokens are; their values are never quoted in a message.
func (r *Reconciler) argValues(ctx context.Context, ro *v1alpha1.Rollout, args []v1alpha1.AnalysisArg) (map[string]string, error) {
	out := make(map[string]string, len(args))
	for _, a := range args {
		switch {
		case a.Value != nil:
			out[a.Name] = *a.Value
		case a.ValueFrom != nil && a.ValueFrom.SecretKeyRef != nil:
			ref := a.ValueFrom.SecretKeyRef
			var secret corev1.Secret
			err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ro.Namespace, Name: ref.Name}, &secret)
			switch {
			case apierrors.IsNotFound(err):
				return nil, stallRecheck(v1alpha1.ReasonAnalysisTemplateMissing,
					fmt.Sprintf("analysis arg %q: Secret %s not found in namespace %s", a.Name, ref.Name, ro.Namespace))
			case err != nil:
				return nil, fmt.Errorf("reading Secret %s for analysis arg %q: %w", ref.Name, a.Name, err)
			}
			v, ok := secret.Data[ref.Key]
			if !ok {
				return nil, stallRecheck(v1alpha1.ReasonAnalysisTemplateMissing,
					fmt.Sprintf("analysis arg %q: Secret %s has no key %q", a.Name, ref.Name, ref.Key))
			}
			out[a.Name] = string(v)
		case a.ValueFrom != nil && a.ValueFrom.FieldRef != nil:
			path := a.ValueFrom.FieldRef.FieldPath
			v, ok := stepanalysis.FieldValue(map[string]string{
				"metadata.name": ro.Name, "metadata.namespace": ro.Namespace, "metadata.uid": string(ro.UID),
			}, ro.Labels, ro.Annotations, path)
			if !ok {
				return nil, stallRecheck(v1alpha1.ReasonAnalysisTemplateMissing,
					fmt.Sprintf("analysis arg %q: the Rollout has no %s (fieldRef reads metadata.name, metadata.namespace, metadata.uid, metadata.labels['k'] or metadata.annotations['k'])", a.Name, path))
			}
			out[a.Name] = v
		}
	}
	return out, nil
}

// templates returns the templates refs name: as recorded in status for the
// canary revision, else read now and recorded.
func (r *Reconciler) templates(ctx context.Context, ro *v1alpha1.Rollout, refs []v1alpha1.AnalysisTemplateRef) (map[stepanalysis.TemplateKey]v1alpha1.AnalysisTemplateSpec, error) {
	out := make(map[stepanalysis.TemplateKey]v1alpha1.AnalysisTemplateSpec, len(refs))
	st := &ro.Status
	for _, used := range st.AnalysisTemplates {
		if used.Revision == st.CanaryRevision {
			out[stepanalysis.TemplateKey{Name: used.Name, ClusterScope: used.ClusterScope}] = used.Spec
		}
	}
	for _, ref := range refs {
		key := stepanalysis.TemplateKey{Name: ref.Name, ClusterScope: ref.ClusterScope}
		if _, ok := out[key]; ok {
			continue
		}
		var (
			spec v1alpha1.AnalysisTemplateSpec
			rv   string
			err  error
		)
		if ref.ClusterScope {
			var t v1alpha1.ClusterAnalysisTemplate
			err = r.APIReader.Get(ctx, types.NamespacedName{Name: ref.Name}, &t)
			spec, rv = t.Spec, t.ResourceVersion
		} else {
			var t v1alpha1.AnalysisTemplate
			err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: ro.Namespace, Name: ref.Name}, &t)
			spec, rv = t.Spec, t.ResourceVersion
		}
		if apierrors.IsNotFound(err) {
			continue // Resolve names it
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", key, err)
		}
		out[key] = spec
		recordTemplate(st, v1alpha1.UsedAnalysisTemplate{Name: ref.Name, ClusterScope: ref.ClusterScope,
			Revision: st.CanaryRevision, ResourceVersion: rv, Spec: spec})
	}
	return out, nil
}

// recordTemplate keeps the templates of the canary revision only.
func recordTemplate(st *v1alpha1.RolloutStatus, used v1alpha1.UsedAnalysisTemplate) {
	kept := st.AnalysisTemplates[:0:0]
	for _, u := range st.AnalysisTemplates {
		if u.Revision == used.Revision && (u.Name != used.Name || u.ClusterScope != used.ClusterScope) {
			kept = append(kept, u)
		}
	}
	st.AnalysisTemplates = append(kept, used)
}
