// Package examples_test keeps the manifests under examples/ working: every
// object under examples/basic, examples/rollout and examples/traffic must
// decode strictly into its Go type and be accepted by a real API server with
// the Stepwise and Gateway API CRDs (schema and CEL rules), and the Flux and
// Argo CD examples must point at paths that exist.
package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// typedDirs hold only objects this module has Go types for.
var typedDirs = []string{"basic", "rollout", "traffic"}

type example struct {
	file string // relative to examples/
	obj  client.Object
}

func (e example) String() string {
	return fmt.Sprintf("%s: %s %s", e.file, e.obj.GetObjectKind().GroupVersionKind().Kind, e.obj.GetName())
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := stepwisev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gatewayv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// documents splits a YAML file into its non-empty documents.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// A document of comments only has no content once converted.
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if s := strings.TrimSpace(string(j)); s != "null" && s != "" {
			docs = append(docs, doc)
		}
	}
}

// loadTyped decodes every object under the typed directories. Decoding is
// strict: an unknown field (a typo such as maxUnavaliable, or a field in
// the wrong place), a duplicate key or a wrong case fails. This matters most
// for the CloneSet's Pod template, which the CRD keeps schemaless, so the
// API server would store a misspelt Pod field without a word.
func loadTyped(t *testing.T) []example {
	t.Helper()
	scheme := newScheme(t)
	var out []example
	for _, dir := range typedDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no YAML files in examples/%s", dir)
		}
		for _, file := range files {
			for i, doc := range documents(t, file) {
				where := fmt.Sprintf("%s (document %d)", file, i+1)
				data, err := yaml.YAMLToJSONStrict(doc)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				var tm metav1.TypeMeta
				if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &tm); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
				ro, err := scheme.New(gvk)
				if err != nil {
					t.Fatalf("%s: %s is not a kind this module knows: %v", where, gvk, err)
				}
				strictErrs, err := kjson.UnmarshalStrict(data, ro)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				for _, e := range strictErrs {
					t.Errorf("%s: %v", where, e)
				}
				obj, ok := ro.(client.Object)
				if !ok {
					t.Fatalf("%s: %T is not an object", where, ro)
				}
				obj.GetObjectKind().SetGroupVersionKind(gvk)
				out = append(out, example{file: file, obj: obj})
			}
		}
	}
	return out
}

func TestExamplesDecodeStrictly(t *testing.T) {
	var kinds []string
	for _, e := range loadTyped(t) {
		kinds = append(kinds, e.obj.GetObjectKind().GroupVersionKind().Kind)
		if e.obj.GetNamespace() != "" {
			// kubectl -n, Flux's targetNamespace and Argo CD's destination
			// choose the namespace; a fixed one would override them.
			t.Errorf("%s sets a namespace", e)
		}
	}
	for _, want := range []string{"CloneSet", "Rollout"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s among the examples", want)
		}
	}
}

// The Rollout example must be coherent with its CloneSet, or it would be
// accepted by the API server and then go nowhere.
func TestRolloutExampleMatchesItsCloneSet(t *testing.T) {
	var (
		rollouts  []*stepwisev1.Rollout
		clonesets = map[string]*stepwisev1.CloneSet{}
	)
	for _, e := range loadTyped(t) {
		if filepath.Dir(e.file) != "rollout" {
			continue
		}
		switch o := e.obj.(type) {
		case *stepwisev1.Rollout:
			rollouts = append(rollouts, o)
		case *stepwisev1.CloneSet:
			clonesets[o.Name] = o
		}
	}
	if len(rollouts) == 0 {
		t.Fatal("no Rollout in examples/rollout")
	}
	for _, ro := range rollouts {
		ref := ro.Spec.WorkloadRef
		cs, ok := clonesets[ref.Name]
		if !ok || ref.APIVersion != stepwisev1.GroupVersion.String() || ref.Kind != "CloneSet" {
			t.Fatalf("Rollout %s drives %s %s %s, which examples/rollout does not define", ro.Name, ref.APIVersion, ref.Kind, ref.Name)
		}
		var percents []int
		for _, st := range ro.Spec.Steps {
			v, err := intstr.GetScaledValueFromIntOrPercent(&st.Partition, 100, true)
			if err != nil {
				t.Fatal(err)
			}
			percents = append(percents, 100-v)
		}
		if !slices.Equal(percents, []int{10, 50, 100}) {
			t.Errorf("steps put %v%% of the Pods on the new revision, want 10/50/100", percents)
		}

		if vp := ro.Spec.VersionPolicy; vp != nil {
			checkVersionPolicy(t, vp, cs)
		}
		// What the controller checks first (refused template constructs,
		// unknown keys, PromQL that does not parse) is better found here.
		if err := stepanalysis.Validate(&ro.Spec); err != nil {
			t.Error(err)
		}
		for i := range ro.Spec.Steps {
			a, ok := ro.Spec.AnalysisForStep(i)
			if !ok {
				t.Errorf("step %d has no analysis", i)
				continue
			}
			for _, m := range a.Metrics {
				// Safe as written: no window reaches back before the canary.
				vars := analysis.Vars{Namespace: "shop", Workload: cs.Name, CanaryPods: "web-a", StablePods: "web-b", CanaryRevision: "web-2", StableRevision: "web-1",
					CanaryAge: "2m", Args: a.LiteralArgs()}
				query, err := analysis.Render(m.Prometheus.Query, vars)
				if err != nil {
					t.Errorf("step %d metric %s: %v", i, m.Name, err)
					continue
				}
				if lookback, err := analysis.Lookback(query, time.Now()); err != nil || lookback > 2*time.Minute {
					t.Errorf("step %d metric %s reads %s back at a canary age of 2m (%v): bound its windows with {{ .CanaryAge }}", i, m.Name, lookback, err)
				}
			}
		}
	}
}

// checkVersionPolicy makes sure the policy names a real container whose
// current tag the constraint accepts; otherwise the first release would be
// refused.
func checkVersionPolicy(t *testing.T, vp *stepwisev1.VersionPolicy, cs *stepwisev1.CloneSet) {
	t.Helper()
	i := slices.IndexFunc(cs.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == vp.Container })
	if i < 0 {
		t.Errorf("versionPolicy.container %q is not a container of CloneSet %s", vp.Container, cs.Name)
		return
	}
	img := cs.Spec.Template.Spec.Containers[i].Image
	tag := img[strings.LastIndex(img, ":")+1:]
	v, err := semver.NewVersion(tag)
	if err != nil {
		t.Errorf("image %s: tag is not a semantic version: %v", img, err)
		return
	}
	if vp.Constraint != "" {
		c, err := semver.NewConstraint(vp.Constraint)
		if err != nil {
			t.Errorf("versionPolicy.constraint: %v", err)
		} else if !c.Check(v) {
			t.Errorf("image %s does not meet versionPolicy.constraint %q", img, vp.Constraint)
		}
	}
}

// TestExamplesPassTheAPIServer dry-run creates every example on a real
// kube-apiserver with the CRDs from config/crd/bases: the OpenAPI schema,
// defaults and CEL rules all run, nothing is stored.
func TestExamplesPassTheAPIServer(t *testing.T) {
	examples := loadTyped(t)
	// examples/traffic's HTTPRoute needs the Gateway API CRDs.
	gateway, err := envtestenv.GatewayAPICRDs()
	if err != nil {
		t.Fatal(err)
	}
	cfg := envtestenv.StartForTest(t, gateway...)
	c, err := client.New(cfg, client.Options{Scheme: newScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Dry runs still need the namespace to exist.
	const ns = "examples"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	create := func(obj client.Object) error {
		obj = obj.DeepCopyObject().(client.Object)
		obj.SetNamespace(ns)
		return c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
	}

	for _, e := range examples {
		if err := create(e.obj); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}

	// A control: the same dry run must refuse a broken Rollout, or the
	// check above proves nothing (say, if the CEL rules were missing from
	// the CRD).
	for _, e := range examples {
		ro, ok := e.obj.(*stepwisev1.Rollout)
		if !ok {
			continue
		}
		broken := ro.DeepCopy()
		broken.Spec.Steps = append(broken.Spec.Steps, stepwisev1.RolloutStep{Partition: intstr.FromString("50%")})
		err := create(broken)
		if err == nil || !strings.Contains(err.Error(), "last step must have partition 0") {
			t.Errorf("%s with a last step at 50%% was not refused by the CEL rule: %v", e, err)
		}
	}
}

// TestGitOpsExamplesPointAtThisRepository checks the paths the Flux and Argo
// CD examples deploy from, and the settings the docs rely on.
func TestGitOpsExamplesPointAtThisRepository(t *testing.T) {
	byKind := map[string][]*unstructured.Unstructured{}
	for _, dir := range []string{"flux", "argocd"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no YAML in examples/%s (%v)", dir, err)
		}
		for _, file := range files {
			for _, doc := range documents(t, file) {
				data, err := yaml.YAMLToJSONStrict(doc)
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				u := &unstructured.Unstructured{}
				if err := u.UnmarshalJSON(data); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				byKind[u.GetKind()] = append(byKind[u.GetKind()], u)
			}
		}
	}

	repoPath := func(what, p string) {
		t.Helper()
		p = strings.TrimPrefix(p, "./")
		if p == "" {
			t.Errorf("%s: no path", what)
			return
		}
		if st, err := os.Stat(filepath.Join("..", p)); err != nil || !st.IsDir() {
			t.Errorf("%s deploys %s, which is not a directory of this repository", what, p)
		}
	}

	ks := byKind["Kustomization"]
	if len(ks) == 0 {
		t.Fatal("no Flux Kustomization in examples/flux")
	}
	paths := map[string]bool{}
	for _, k := range ks {
		what := "Flux Kustomization " + k.GetName()
		p, _, _ := unstructured.NestedString(k.Object, "spec", "path")
		repoPath(what, p)
		paths[strings.TrimPrefix(p, "./")] = true
		if wait, _, _ := unstructured.NestedBool(k.Object, "spec", "wait"); !wait {
			t.Errorf("%s: spec.wait is not true", what)
		}
		timeout, _, _ := unstructured.NestedString(k.Object, "spec", "timeout")
		if _, err := time.ParseDuration(timeout); err != nil {
			t.Errorf("%s: spec.timeout %q: %v", what, timeout, err)
		}
	}
	if !paths["examples/rollout"] {
		t.Errorf("no Flux Kustomization deploys examples/rollout (paths: %v)", paths)
	}
	if len(byKind["GitRepository"]) == 0 {
		t.Error("no GitRepository in examples/flux")
	}

	apps := byKind["Application"]
	if len(apps) == 0 {
		t.Fatal("no Argo CD Application in examples/argocd")
	}
	// The Rollout writes the partition of OpenKruise CloneSets and
	// StatefulSets: an Application that ignores it must keep it out of
	// syncs too. A stepwise.dev CloneSet needs no rule: its Rollout governs
	// it through its own status and writes none of its fields.
	ignored := map[string]bool{}
	for _, app := range apps {
		what := "Application " + app.GetName()
		p, _, _ := unstructured.NestedString(app.Object, "spec", "source", "path")
		repoPath(what, p)
		diffs, _, _ := unstructured.NestedSlice(app.Object, "spec", "ignoreDifferences")
		for _, d := range diffs {
			d, _ := d.(map[string]any)
			ptrs, _, _ := unstructured.NestedStringSlice(d, "jsonPointers")
			group, _ := d["group"].(string)
			kind, _ := d["kind"].(string)
			if group == stepwisev1.GroupVersion.Group {
				t.Errorf("%s ignores differences of stepwise.dev %s %v: a Rollout writes none of its fields, remove the rule", what, kind, ptrs)
				continue
			}
			for _, ptr := range ptrs {
				if !strings.HasSuffix(ptr, "/partition") {
					continue
				}
				ignored[group+"/"+kind+ptr] = true
				opts, _, _ := unstructured.NestedStringSlice(app.Object, "spec", "syncPolicy", "syncOptions")
				if !slices.Contains(opts, "RespectIgnoreDifferences=true") {
					t.Errorf("%s ignores %s in diffs but a sync would still write it: add RespectIgnoreDifferences=true", what, ptr)
				}
			}
		}
	}
	for _, want := range []string{"apps.kruise.io/CloneSet/spec/updateStrategy/partition", "apps/StatefulSet/spec/updateStrategy/rollingUpdate/partition"} {
		if !ignored[want] {
			t.Errorf("no Application ignores %s, which a Rollout writes", want)
		}
	}
}
