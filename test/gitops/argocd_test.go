package gitops

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	applicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
	appProjectGVK  = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AppProject"}
)

// argoCD is Argo CD's application controller and repo server (one
// binary, acting by its name) with Debian's redis-server, against the bed,
// with examples/argocd's Application "web" pointed at the test's git
// server and Stepwise's health scripts registered as the docs tell users
// (config/argocd/argocd-cm-patch.yaml in argocd-cm).
type argoCD struct {
	bed  *bed
	repo *repo
	ns   string // the Application's namespace (argocd)
	dest string // the app's namespace
	// server is the bed's cluster as the Applications' destination names it.
	server string
}

func startRedis(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed (Debian package redis-server): %v", err)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	startProcess(t, "redis-server", path, nil, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	eventually(t, "redis-server to listen", func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		_ = c.Close()
		return true, ""
	})
	return addr
}

func startArgoCD(t *testing.T, b *bed, r *repo) *argoCD {
	t.Helper()
	ctx := t.Context()
	apps := readDocs(t, b.root, "examples/argocd/application.yaml")
	var app *unstructured.Unstructured
	for _, u := range apps {
		if u.GetName() == "web" {
			app = u
		}
	}
	if app == nil {
		t.Fatal("examples/argocd/application.yaml has no Application web")
	}
	ns := app.GetNamespace()
	if err := b.cluster.CreateNamespace(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// argocd-cm with Stepwise's health scripts, as the docs have users
	// patch it in; its reconciliation timeout is the test's.
	cm := readDocs(t, b.root, "config/argocd/argocd-cm-patch.yaml")[0]
	set(t, cm, "5s", "data", "timeout.reconciliation")
	set(t, cm, "0s", "data", "timeout.reconciliation.jitter")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/part-of": "argocd"}},
		StringData: map[string]string{"server.secretkey": "stepwise-test"},
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "default", "namespace": ns},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	project.SetGroupVersionKind(appProjectGVK)
	if err := b.client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Create(ctx, project); err != nil {
		t.Fatal(err)
	}

	redis := startRedis(t)
	argocd := filepath.Join(b.bin, "argocd")
	repoServer := freeAddr(t)
	_, repoPort, _ := net.SplitHostPort(repoServer)
	env := []string{"KUBECONFIG=" + b.cluster.Kubeconfig, "ARGOCD_GPG_ENABLED=false"}
	startProcessAs(t, "argocd-repo-server", argocd, "argocd-repo-server", env,
		"--address=127.0.0.1", "--port="+repoPort, "--metrics-address=127.0.0.1", "--metrics-port="+port(t),
		"--disable-tls", "--redis="+redis, "--loglevel=info",
		// git's branch is resolved again at each comparison (every 5 s), so a
		// commit is seen without a webhook.
		"--revision-cache-expiration=1s")
	startProcessAs(t, "argocd-application-controller", argocd, "argocd-application-controller", env,
		"--namespace="+ns, "--repo-server="+repoServer, "--repo-server-plaintext", "--redis="+redis,
		"--metrics-port="+port(t), "--app-resync=5", "--app-resync-jitter=0", "--persist-resource-health=true",
		"--self-heal-timeout-seconds=1", "--loglevel=info")

	// The Application's destination is https://kubernetes.default.svc, the
	// cluster Argo CD runs in, which it reaches through its Pod's service
	// account. Run as a process, it has none: the cluster is registered as
	// Argo CD's docs describe for any other (a cluster Secret), and the
	// destination names it.
	server := registerCluster(t, b, ns)
	set(t, app, server, "spec", "destination", "server")
	dest, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "namespace")
	set(t, app, r.url, "spec", "source", "repoURL")
	set(t, app, "main", "spec", "source", "targetRevision")
	if err := b.client.Create(ctx, app); err != nil {
		t.Fatalf("creating Application %s: %v", app.GetName(), err)
	}
	return &argoCD{bed: b, repo: r, ns: ns, dest: dest, server: server}
}

// registerCluster writes the bed's cluster as an Argo CD cluster Secret
// with the admin client certificate, and returns its server URL.
func registerCluster(t *testing.T, b *bed, ns string) string {
	t.Helper()
	cfg := b.cluster.RESTConfig
	data := func(inline []byte, file string) string {
		if len(inline) == 0 && file != "" {
			var err error
			if inline, err = os.ReadFile(file); err != nil {
				t.Fatal(err)
			}
		}
		return base64.StdEncoding.EncodeToString(inline)
	}
	config, err := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{
		"caData":   data(cfg.CAData, cfg.CAFile),
		"certData": data(cfg.CertData, cfg.CertFile),
		"keyData":  data(cfg.KeyData, cfg.KeyFile),
	}})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bed", Namespace: ns, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		StringData: map[string]string{"name": "bed", "server": cfg.Host, "config": string(config)},
	}
	if err := b.client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	return cfg.Host
}

func port(t *testing.T) string {
	t.Helper()
	_, p, _ := net.SplitHostPort(freeAddr(t))
	if _, err := strconv.Atoi(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// status is the Application's verdict: ready when Synced and Healthy on a
// revision, with the health of the Stepwise objects that are not Healthy.
func (a *argoCD) status(ctx context.Context) toolStatus {
	u, err := a.bed.get(ctx, applicationGVK, a.ns, "web")
	if err != nil {
		return toolStatus{text: err.Error()}
	}
	sync, _, _ := unstructured.NestedString(u.Object, "status", "sync", "status")
	rev, _, _ := unstructured.NestedString(u.Object, "status", "sync", "revision")
	health, _, _ := unstructured.NestedString(u.Object, "status", "health", "status")
	op, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
	reconciled, _, _ := unstructured.NestedString(u.Object, "status", "reconciledAt")
	var notHealthy []string
	resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range resources {
		m, _ := r.(map[string]any)
		if st, _ := m["status"].(string); st != "" && st != "Synced" {
			notHealthy = append(notHealthy, fmt.Sprintf("%s/%s %s", m["kind"], m["name"], st))
		}
		h, _ := m["health"].(map[string]any)
		if h == nil || h["status"] == "Healthy" {
			continue
		}
		msg, _ := h["message"].(string)
		if len(msg) > 100 {
			msg = msg[:100] + "…"
		}
		notHealthy = append(notHealthy, fmt.Sprintf("%s/%s %s: %s", m["kind"], m["name"], h["status"], msg))
	}
	return toolStatus{
		ready:      sync == "Synced" && health == "Healthy",
		settledBad: sync != "Synced" || health != "Healthy",
		revision:   rev,
		text:       fmt.Sprintf("%s %s %s op=%s [%s]", sync, health, short(rev), op, strings.Join(notHealthy, "; ")),
		pass:       reconciled,
	}
}

// ignoreRoute sets the Application's ignoreDifferences to the example's,
// with (on) or without its HTTPRoute rule (a merge patch, as `kubectl
// patch` would).
func (a *argoCD) ignoreRoute(t *testing.T, on bool) {
	t.Helper()
	app := doc(t, a.bed.root, "examples/argocd/application.yaml", "web")
	rules, _, _ := unstructured.NestedSlice(app.Object, "spec", "ignoreDifferences")
	var keep []any
	for _, r := range rules {
		if on || r.(map[string]any)["kind"] != "HTTPRoute" {
			keep = append(keep, r)
		}
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"ignoreDifferences": keep}})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(applicationGVK)
	u.SetNamespace(a.ns)
	u.SetName("web")
	if err := a.bed.client.Patch(t.Context(), u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// TestArgoCD runs the stories with real Argo CD: each starts where the one
// before left the repository and the cluster.
func TestArgoCD(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster, Prometheus, redis-server and Argo CD")
	}
	// Each tool has a bed of its own; side by side they take the time of one.
	t.Parallel()
	b := newBed(t, "argocd")
	r := startGitServer(t).newRepo(t, "stepwise")
	first := r.commit("web 6.7.0 with its Rollout", appFiles(t, b.root, "6.7.0", b.prom.URL()))
	a := startArgoCD(t, b, r)
	runStories(t, &stand{bed: b, repo: r, ns: a.dest, status: a.status, tool: "Argo CD", interval: 5 * time.Second, ignoreRoute: a.ignoreRoute,
		installStepwise: a.installStepwise, stepwiseApplied: a.stepwiseApplied, uninstallStepwise: a.uninstallStepwise, trackCRD: trackCRD, first: first})
}

// installStepwise creates examples/argocd's Application "stepwise" over
// path instead of the example's config/default (the test runs the manager
// itself), with the finalizer that makes its deletion delete what it
// applied.
func (a *argoCD) installStepwise(t *testing.T, path string) {
	t.Helper()
	app := doc(t, a.bed.root, "examples/argocd/application.yaml", "stepwise")
	set(t, app, a.repo.url, "spec", "source", "repoURL")
	set(t, app, "main", "spec", "source", "targetRevision")
	set(t, app, path, "spec", "source", "path")
	set(t, app, a.server, "spec", "destination", "server")
	app.SetFinalizers([]string{"resources-finalizer.argocd.argoproj.io"})
	if err := a.bed.client.Create(t.Context(), app); err != nil {
		t.Fatalf("creating Application %s: %v", app.GetName(), err)
	}
}

// stepwiseApplied waits until Application "stepwise" has compared and
// synced commit (a sync that skips a prune leaves it OutOfSync, so that is
// not waited for) and returns the kind and name of each resource it
// tracks.
func (a *argoCD) stepwiseApplied(t *testing.T, commit string) []string {
	t.Helper()
	var tracked []string
	eventually(t, "Application stepwise to sync "+short(commit), func() (bool, string) {
		u, err := a.bed.get(t.Context(), applicationGVK, a.ns, "stepwise")
		if err != nil {
			return false, err.Error()
		}
		sync, _, _ := unstructured.NestedString(u.Object, "status", "sync", "status")
		compared, _, _ := unstructured.NestedString(u.Object, "status", "sync", "revision")
		synced, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "syncResult", "revision")
		op, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
		msg, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "message")
		resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
		tracked = tracked[:0]
		for _, r := range resources {
			if m, ok := r.(map[string]any); ok {
				tracked = append(tracked, fmt.Sprintf("%s/%s", m["kind"], m["name"]))
			}
		}
		return compared == commit && synced == commit && op == "Succeeded", fmt.Sprintf("%s %s, synced %s op=%s: %s", sync, short(compared), short(synced), op, msg)
	})
	return tracked
}

// trackCRD writes Application "stepwise"'s tracking id (Argo CD's default
// annotation tracking) into crd, as a templating tool that stamps it would:
// Argo CD's repo server stamps every object but a CRD.
func trackCRD(crd *unstructured.Unstructured) {
	annotations := crd.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["argocd.argoproj.io/tracking-id"] = "stepwise:apiextensions.k8s.io/CustomResourceDefinition:stepwise-system/" + crd.GetName()
	crd.SetAnnotations(annotations)
}

// uninstallStepwise deletes Application "stepwise" and waits until it is
// gone: its finalizer deletes what it applied first.
func (a *argoCD) uninstallStepwise(t *testing.T) {
	t.Helper()
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(applicationGVK)
	app.SetNamespace(a.ns)
	app.SetName("stepwise")
	if err := a.bed.client.Delete(t.Context(), app); err != nil {
		t.Fatalf("deleting Application stepwise: %v", err)
	}
	eventually(t, "Argo CD to delete what Application stepwise applied, then the Application", func() (bool, string) {
		_, err := a.bed.get(t.Context(), applicationGVK, a.ns, "stepwise")
		return apierrors.IsNotFound(err), fmt.Sprintf("Application stepwise: %v", err)
	})
}
