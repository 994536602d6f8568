package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/crdschema"
)

// LintOptions are what Lint checks besides the CRDs.
type LintOptions struct {
	// CheckRollout runs the controller's own checks of a Rollout, those
	// the CRD cannot express (each step's analysis queries rendered and
	// parsed). The command passes the controller's function, which lives
	// above this package.
	CheckRollout func(*stepwisev1.Rollout) error
}

// LintFinding is the verdict on one Stepwise object of a file.
type LintFinding struct {
	Source string
	// Document counts from 1, in the file.
	Document   int
	Kind, Name string
	// Err is nil when the object is valid.
	Err error
}

// LintReport is what Lint found in every file.
type LintReport struct {
	Findings []LintFinding
	// Skipped counts the documents that are not Stepwise objects.
	Skipped int
}

// Invalid counts the findings with an error.
func (r LintReport) Invalid() int {
	n := 0
	for _, f := range r.Findings {
		if f.Err != nil {
			n++
		}
	}
	return n
}

// Lint checks the Rollouts and CloneSets of files offline, as the API
// server and the controller would: each against the CRD shipped in this
// binary (unknown fields, types, enums, defaults, CEL rules, with the API
// server's message), each Rollout with o.CheckRollout, and a Rollout whose
// CloneSet is in the files against that CloneSet (spec.versionPolicy's
// container must be one of its containers, or the controller refuses every
// revision). Documents of other kinds are skipped. A file that cannot be
// read or parsed is an error.
func Lint(ctx context.Context, files []ManifestFile, o LintOptions) (LintReport, error) {
	var report LintReport
	// objects[i] is the object of report.Findings[i].
	var objects []*unstructured.Unstructured
	validators := map[string]*crdschema.Validator{}
	for _, file := range files {
		docs, err := readDocuments(file)
		if err != nil {
			return report, err
		}
		for i, u := range docs {
			gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
			if gv.Group != stepwisev1.GroupVersion.Group {
				report.Skipped++
				continue
			}
			f := LintFinding{Source: file.Source, Document: i + 1, Kind: u.GetKind(), Name: u.GetName()}
			switch {
			case gv.Version != stepwisev1.GroupVersion.Version:
				f.Err = fmt.Errorf("%s is not served: this plugin knows %s", u.GetAPIVersion(), stepwisev1.GroupVersion)
			case u.GetKind() != "Rollout" && u.GetKind() != "CloneSet":
				f.Err = fmt.Errorf("kind %s is not a %s kind (Rollout, CloneSet)", u.GetKind(), stepwisev1.GroupVersion.Group)
			default:
				v := validators[u.GetKind()]
				if v == nil {
					if v, err = crdschema.Shipped(stepwisev1.GroupVersion.WithKind(u.GetKind())); err != nil {
						return report, err
					}
					validators[u.GetKind()] = v
				}
				f.Err = v.Validate(ctx, u)
			}
			report.Findings = append(report.Findings, f)
			objects = append(objects, u)
		}
	}

	cloneSets := map[string]*stepwisev1.CloneSet{}
	for i, u := range objects {
		if f := report.Findings[i]; f.Err == nil && f.Kind == "CloneSet" {
			if cs, err := CloneSetFromUnstructured(u); err == nil {
				cloneSets[u.GetNamespace()+"/"+u.GetName()] = cs
			}
		}
	}
	for i, u := range objects {
		f := &report.Findings[i]
		if f.Err != nil || f.Kind != "Rollout" {
			continue
		}
		r, err := RolloutFromUnstructured(u)
		if err != nil {
			f.Err = err
			continue
		}
		if o.CheckRollout != nil {
			if err := o.CheckRollout(r); err != nil {
				f.Err = err
				continue
			}
		}
		f.Err = checkAgainstCloneSet(r, cloneSets)
	}
	return report, nil
}

// checkAgainstCloneSet checks a Rollout against its CloneSet when the files
// hold it (same namespace, or both without one).
func checkAgainstCloneSet(r *stepwisev1.Rollout, cloneSets map[string]*stepwisev1.CloneSet) error {
	ref := r.Spec.WorkloadRef
	cs := cloneSets[r.Namespace+"/"+ref.Name]
	if cs == nil || ref.APIVersion != stepwisev1.GroupVersion.String() || ref.Kind != "CloneSet" || r.Spec.VersionPolicy == nil {
		return nil
	}
	spec, c := &cs.Spec.Template.Spec, r.Spec.VersionPolicy.Container
	named := func(k corev1.Container) bool { return k.Name == c }
	if slices.ContainsFunc(spec.Containers, named) || slices.ContainsFunc(spec.InitContainers, named) {
		return nil
	}
	return fmt.Errorf("spec.versionPolicy.container: %q is not a container of CloneSet %s (it has %s): the controller would refuse every revision",
		c, cs.Name, strings.Join(containerNames(*spec), ", "))
}

// WriteLintReport prints one line per object and a summary.
func WriteLintReport(w io.Writer, r LintReport) error {
	var b strings.Builder
	for _, f := range r.Findings {
		name := f.Name
		if name == "" {
			name = fmt.Sprintf("(document %d)", f.Document)
		}
		verdict := "valid"
		if f.Err != nil {
			verdict = f.Err.Error()
		}
		fmt.Fprintf(&b, "%s: %s %s: %s\n", f.Source, f.Kind, name, verdict)
	}
	fmt.Fprintf(&b, "%d %s checked, %d invalid", len(r.Findings), plural(len(r.Findings), "object", "objects"), r.Invalid())
	if r.Skipped > 0 {
		fmt.Fprintf(&b, "; %d %s of other kinds skipped", r.Skipped, plural(r.Skipped, "document", "documents"))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
