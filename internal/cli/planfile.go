package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/crdschema"
)

// ManifestFile is what ReadCloneSet and Lint read: a file's content and how
// to name it in errors ("-" for stdin).
type ManifestFile struct {
	Source string
	Data   io.Reader
}

// ReadCloneSet picks a stepwise.dev CloneSet out of a YAML or JSON stream
// (several documents, as a GitOps file often holds a Service beside it) and
// validates it offline against the shipped CRD, so that `plan -f` refuses
// what the API server would refuse. name selects one CloneSet when the
// stream has several; namespace, when set (-n), must match the document's.
func ReadCloneSet(ctx context.Context, f ManifestFile, name, namespace string) (*stepwisev1.CloneSet, error) {
	docs, err := readDocuments(f)
	if err != nil {
		return nil, err
	}
	var found []*unstructured.Unstructured
	var names []string
	for _, u := range docs {
		if u.GetAPIVersion() != stepwisev1.GroupVersion.String() || u.GetKind() != "CloneSet" {
			continue
		}
		names = append(names, u.GetName())
		if name == "" || u.GetName() == name {
			found = append(found, u)
		}
	}
	switch {
	case len(found) == 0 && name != "" && len(names) > 0:
		return nil, fmt.Errorf("%s: no CloneSet %q (it has %s)", f.Source, name, strings.Join(names, ", "))
	case len(found) == 0:
		return nil, fmt.Errorf("%s: no CloneSet of %s", f.Source, stepwisev1.GroupVersion)
	case len(found) > 1:
		return nil, fmt.Errorf("%s has CloneSets %s: name the one to plan", f.Source, strings.Join(names, ", "))
	}
	u := found[0]
	if ns := u.GetNamespace(); namespace != "" && ns != "" && ns != namespace {
		return nil, fmt.Errorf("%s: CloneSet %s is in namespace %q, not %q as -n says", f.Source, u.GetName(), ns, namespace)
	} else if ns == "" {
		u.SetNamespace(namespace)
	}
	v, err := crdschema.Shipped(stepwisev1.GroupVersion.WithKind("CloneSet"))
	if err != nil {
		return nil, err
	}
	if err := v.Validate(ctx, u); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Source, err)
	}
	return CloneSetFromUnstructured(u)
}

// readDocuments splits a stream into its objects; empty documents (a
// leading "---", comments only) are skipped.
func readDocuments(f ManifestFile) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(f.Data), 4096)
	var docs []*unstructured.Unstructured
	for i := 1; ; i++ {
		var raw json.RawMessage
		err := r.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: document %d: %w", f.Source, i, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("reading %s: document %d: %w", f.Source, i, err)
		}
		docs = append(docs, u)
	}
	return docs, nil
}

// ValidatePlan checks a planned Rollout against the shipped CRD, so that
// plan never prints a manifest the API server would refuse (a --name too
// long for the CRD's rules, say).
func ValidatePlan(ctx context.Context, r *stepwisev1.Rollout) error {
	doc, err := manifestNode(r, nil)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, doc.Content[0]); err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(buf.Bytes()); err != nil {
		return fmt.Errorf("re-reading the planned rollout: %w", err)
	}
	v, err := crdschema.Shipped(stepwisev1.GroupVersion.WithKind("Rollout"))
	if err != nil {
		return err
	}
	if err := v.Validate(ctx, u); err != nil {
		return fmt.Errorf("the planned rollout would be refused: %w", err)
	}
	return nil
}
