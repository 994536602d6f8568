package gitops

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

const fluxNamespace = "flux-system"

// flux is source-controller and kustomize-controller running against the
// bed, with examples/flux's GitRepository and the app's Kustomization
// ("web") pointed at the test's git server.
type flux struct {
	bed  *bed
	repo *repo
	ns   string
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func startFlux(t *testing.T, b *bed, r *repo) *flux {
	t.Helper()
	ctx := t.Context()
	// examples/flux/namespace.yaml: the namespace the app deploys into.
	ns := readDocs(t, b.root, "examples/flux/namespace.yaml")[0]
	for _, name := range []string{fluxNamespace, ns.GetName()} {
		if err := b.cluster.CreateNamespace(ctx, name); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	env := []string{"KUBECONFIG=" + b.cluster.Kubeconfig, "RUNTIME_NAMESPACE=" + fluxNamespace}
	storage := freeAddr(t)
	startProcess(t, "source-controller", filepath.Join(b.bin, "source-controller"), env,
		"--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+storage,
		"--metrics-addr=0", "--health-addr=0", "--enable-leader-election=false", "--log-level=info")
	startProcess(t, "kustomize-controller", filepath.Join(b.bin, "kustomize-controller"), env,
		"--metrics-addr=0", "--health-addr=0", "--enable-leader-election=false", "--log-level=info")

	gr := readDocs(t, b.root, "examples/flux/gitrepository.yaml")[0]
	set(t, gr, r.url, "spec", "url")
	set(t, gr, map[string]any{"branch": "main"}, "spec", "ref")
	set(t, gr, "2s", "spec", "interval")
	ks := doc(t, b.root, "examples/flux/kustomizations.yaml", "web")
	// The test runs Stepwise itself; examples/flux's "stepwise"
	// Kustomization (config/default) is not applied, so nothing to wait for.
	unstructured.RemoveNestedField(ks.Object, "spec", "dependsOn")
	// Re-apply often, so that drift and re-applies happen during releases.
	set(t, ks, "10s", "spec", "interval")
	set(t, ks, "5s", "spec", "retryInterval")
	set(t, ks, "3m", "spec", "timeout")
	if gr.GetName() != ks.Object["spec"].(map[string]any)["sourceRef"].(map[string]any)["name"] {
		t.Fatalf("the Kustomization's sourceRef does not name GitRepository %s", gr.GetName())
	}
	for _, u := range []*unstructured.Unstructured{gr, ks} {
		if err := b.client.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return &flux{bed: b, repo: r, ns: ns.GetName()}
}

// status is the Kustomization's verdict: Ready and the revision it is about.
func (f *flux) status(ctx context.Context) toolStatus {
	u, err := f.bed.get(ctx, kustomizationGVK, fluxNamespace, "web")
	if err != nil {
		return toolStatus{text: err.Error()}
	}
	st, reason, msg := condition(u, "Ready")
	applied, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
	attempted, _, _ := unstructured.NestedString(u.Object, "status", "lastAttemptedRevision")
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	rev := attempted
	if st == "True" {
		rev = applied
	}
	// Each reconcile (an apply of git) starts by setting Ready Unknown,
	// reason Progressing.
	pass := ""
	if reason == "Progressing" {
		pass, _ = conditionMap(u, "Ready")["lastTransitionTime"].(string)
	}
	return toolStatus{
		ready:      st == string(metav1.ConditionTrue),
		settledBad: st == string(metav1.ConditionFalse),
		revision:   rev[strings.LastIndex(rev, ":")+1:],
		text:       fmt.Sprintf("Ready=%s %s %s (%s)", st, reason, short(rev[strings.LastIndex(rev, ":")+1:]), msg),
		pass:       pass,
	}
}

// setTimeout sets the Kustomization's timeout (a merge patch, as
// `kubectl patch` would).
func (f *flux) setTimeout(t *testing.T, d string) {
	t.Helper()
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	ks.SetNamespace(fluxNamespace)
	ks.SetName("web")
	patch := []byte(`{"spec":{"timeout":"` + d + `"}}`)
	if err := f.bed.client.Patch(t.Context(), ks, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// TestFlux runs the stories with real Flux: each starts where the one
// before left the repository and the cluster.
func TestFlux(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster, Prometheus and Flux")
	}
	// Each tool has a bed of its own; side by side they take the time of one.
	t.Parallel()
	b := newBed(t, "source-controller", "kustomize-controller")
	r := startGitServer(t).newRepo(t, "stepwise")
	first := r.commit("web 6.7.0 with its Rollout", appFiles(t, b.root, "6.7.0", b.prom.URL()))
	f := startFlux(t, b, r)
	runStories(t, &stand{bed: b, repo: r, ns: f.ns, status: f.status, tool: "Flux", interval: 10 * time.Second, setTimeout: f.setTimeout,
		installStepwise: f.installStepwise, stepwiseApplied: f.stepwiseApplied, uninstallStepwise: f.uninstallStepwise, first: first})
}

// installStepwise creates examples/flux's "stepwise" Kustomization over
// path instead of the example's config/default (the test runs the manager
// itself).
func (f *flux) installStepwise(t *testing.T, path string) {
	t.Helper()
	ks := doc(t, f.bed.root, "examples/flux/kustomizations.yaml", "stepwise")
	set(t, ks, "./"+path, "spec", "path")
	if err := f.bed.client.Create(t.Context(), ks); err != nil {
		t.Fatalf("creating Kustomization %s: %v", ks.GetName(), err)
	}
}

// stepwiseApplied waits until Kustomization "stepwise" has applied commit
// and returns the ids of its inventory: what it deletes when it is deleted.
func (f *flux) stepwiseApplied(t *testing.T, commit string) []string {
	t.Helper()
	var ids []string
	eventually(t, "Kustomization stepwise to apply "+short(commit), func() (bool, string) {
		u, err := f.bed.get(t.Context(), kustomizationGVK, fluxNamespace, "stepwise")
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Ready")
		applied, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
		entries, _, _ := unstructured.NestedSlice(u.Object, "status", "inventory", "entries")
		ids = ids[:0]
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok {
				id, _ := m["id"].(string)
				ids = append(ids, id)
			}
		}
		return st == string(metav1.ConditionTrue) && strings.HasSuffix(applied, ":"+commit), fmt.Sprintf("Ready=%s %s %s: %s", st, reason, applied, msg)
	})
	return ids
}

// uninstallStepwise deletes Kustomization "stepwise" and waits until it is
// gone: its finalizer deletes (prune: true) what it applied first.
func (f *flux) uninstallStepwise(t *testing.T) {
	t.Helper()
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	ks.SetNamespace(fluxNamespace)
	ks.SetName("stepwise")
	if err := f.bed.client.Delete(t.Context(), ks); err != nil {
		t.Fatalf("deleting Kustomization stepwise: %v", err)
	}
	eventually(t, "Flux to delete what Kustomization stepwise applied, then the Kustomization", func() (bool, string) {
		_, err := f.bed.get(t.Context(), kustomizationGVK, fluxNamespace, "stepwise")
		return apierrors.IsNotFound(err), fmt.Sprintf("Kustomization stepwise: %v", err)
	})
}
