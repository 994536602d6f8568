package realnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/harness"
)

// bed is the running node with a client that knows Stepwise's types, and
// the release it installs.
type bed struct {
	*Node
	client  client.Client
	release Release
}

const managerNamespace = "stepwise-system"

// startBed builds the images, starts the node with them and the release's
// image imported, and stops it when the test ends, printing the node's log
// tails if the test failed.
func startBed(t *testing.T) *bed {
	t.Helper()
	root, err := envtestenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := FindRelease(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("installing the release in %s", rel.Dir)
	began := time.Now()
	images := filepath.Join(t.TempDir(), "images.tar")
	if err := BuildImages(t.Context(), root, images); err != nil {
		t.Fatal(err)
	}
	t.Logf("images built in %s", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	n, err := Start(context.Background(), Options{Images: []string{images, rel.ImageArchive}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"kubelet.log", "containerd.log"} {
				logTail(t, filepath.Join(LogDir(), name), 40)
			}
			n.Cluster.LogTails(t.Logf, 20)
		}
		if err := n.Stop(); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
	})
	t.Logf("node %s Ready in %s", NodeName, time.Since(began).Round(time.Millisecond))
	c, err := harness.NewClient(n.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &bed{Node: n, client: c, release: rel}
}

func logTail(t *testing.T, path string, lines int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	t.Logf("--- last %d lines of %s:\n%s", len(all), path, strings.Join(all, "\n"))
}

// install applies the release's install.yaml as `kubectl apply
// --server-side -f` would, waits for the manager Deployment to be
// available, and returns the manager's image that install.yaml names.
func (b *bed) install(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(b.release.InstallYAML)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeManifests(t, data)
	b.apply(t, objs)
	b.waitManagerAvailable(t, managerNamespace)
	return managerImageOf(t, objs)
}

// decodeManifests decodes a multi-document YAML stream.
func decodeManifests(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := docs.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// managerImageOf is the image of the manager Deployment among objs.
func managerImageOf(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetName() != "stepwise-manager" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("the manager Deployment has %d containers", len(containers))
		}
		img, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
		return img
	}
	t.Fatal("no manager Deployment")
	return ""
}

// apply applies objs in order as kubectl apply --server-side does, and
// waits for each CRD among them to be served.
func (b *bed) apply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		if err := b.client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "CustomResourceDefinition" {
			b.waitEstablished(t, u.GetName())
		}
	}
}

// waitManagerAvailable waits for the manager Deployment of namespace to
// have one available replica at its generation. It may run in a cleanup,
// after the test's context is done.
func (b *bed) waitManagerAvailable(t *testing.T, namespace string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(b.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "stepwise-manager"}, d)).To(gomega.Succeed())
		g.Expect(d.Status.ObservedGeneration).To(gomega.Equal(d.Generation))
		g.Expect(d.Status.AvailableReplicas).To(gomega.Equal(int32(1)), "available manager replicas")
	}, 3*time.Minute, time.Second).Should(gomega.Succeed())
}

func (b *bed) waitEstablished(t *testing.T, name string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		g.Expect(b.client.Get(t.Context(), client.ObjectKey{Name: name}, u)).To(gomega.Succeed())
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		g.Expect(established).To(gomega.BeTrue(), "CRD %s Established", name)
	}, time.Minute, 200*time.Millisecond).Should(gomega.Succeed())
}

// managerPod is the one running manager Pod.
func (b *bed) managerPods(g gomega.Gomega) []corev1.Pod {
	var list corev1.PodList
	g.Expect(b.client.List(context.Background(), &list, client.InNamespace(managerNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "stepwise", "app.kubernetes.io/component": "manager"})).To(gomega.Succeed())
	return list.Items
}

func (b *bed) namespace(t *testing.T, name string) string {
	t.Helper()
	if err := b.Cluster.CreateNamespace(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// demoCloneSet runs the demo app (container app) with a sidecar (the pause
// binary) and a readiness probe, on the demo image of tag.
func demoCloneSet(ns, name, tag string, replicas int32, strategy stepwisev1.CloneSetUpdateStrategyType) *stepwisev1.CloneSet {
	labels := map[string]string{"app": name}
	maxUnavailable := intstr.FromInt32(1)
	return &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(5)),
					Containers: []corev1.Container{{
						Name:            "app",
						Image:           DemoImage + ":" + tag,
						ImagePullPolicy: corev1.PullNever,
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
					}, {
						Name:            "sidecar",
						Image:           SandboxImage,
						ImagePullPolicy: corev1.PullNever,
					}},
				},
			},
			UpdateStrategy: stepwisev1.CloneSetUpdateStrategy{
				Type: strategy, MaxUnavailable: &maxUnavailable,
				// Without a grace period the image is patched right after
				// the readiness gate goes False, before the kubelet and the
				// EndpointSlice controller have taken the Pod out of service.
				InPlaceUpdateStrategy: &stepwisev1.InPlaceUpdateStrategy{GracePeriodSeconds: 2},
			},
		},
	}
}

func demoService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
}

func (b *bed) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := b.client.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func (b *bed) mutate(t *testing.T, ns, name string, change func(*stepwisev1.CloneSet)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs := &stepwisev1.CloneSet{}
		if err := b.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, cs); err != nil {
			return err
		}
		change(cs)
		return b.client.Update(t.Context(), cs)
	})
	if err != nil {
		t.Fatalf("updating CloneSet %s/%s: %v", ns, name, err)
	}
}

func (b *bed) pods(g gomega.Gomega, ns string) []corev1.Pod {
	var list corev1.PodList
	g.Expect(b.client.List(context.Background(), &list, client.InNamespace(ns))).To(gomega.Succeed())
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// waitSettled waits until the CloneSet observed its generation and all its
// Pods are updated and ready.
func (b *bed) waitSettled(t *testing.T, ns, name string, replicas int32, timeout time.Duration) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		cs := &stepwisev1.CloneSet{}
		g.Expect(b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs)).To(gomega.Succeed())
		g.Expect(cs.Status.ObservedGeneration).To(gomega.Equal(cs.Generation))
		g.Expect(cs.Status.Replicas).To(gomega.Equal(replicas), "replicas")
		g.Expect(cs.Status.ReadyReplicas).To(gomega.Equal(replicas), "readyReplicas")
		g.Expect(cs.Status.UpdatedReadyReplicas).To(gomega.Equal(replicas), "updatedReadyReplicas")
	}, timeout, 250*time.Millisecond).Should(gomega.Succeed())
}

// instance is what the demo app says about itself at /instance.
type instance struct {
	Version  string    `json:"version"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
	// FirstInstance is the instance that first ran over the Pod's data
	// volume, when the Pod sets DATA_DIR.
	FirstInstance string `json:"firstInstance"`
}

// httpClient talks to Pod IPs on the node's bridge only.
var httpClient = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

func askInstance(ip string) (instance, error) {
	var in instance
	resp, err := httpClient.Get(fmt.Sprintf("http://%s:8080/instance", ip))
	if err != nil {
		return in, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return in, err
	}
	if resp.StatusCode != http.StatusOK {
		return in, fmt.Errorf("GET /instance: %s", resp.Status)
	}
	return in, json.Unmarshal(body, &in)
}

func containerStatus(pod *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

func imageOf(pod *corev1.Pod, container string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// scrapeManagerMetrics reads the manager's /metrics as Prometheus would
// through the Service stepwise-manager-metrics: at the address and port of
// the Service's ready endpoint, with the token of a ServiceAccount bound
// to ClusterRole stepwise-metrics-reader. It also checks that a request
// without a token is refused.
func (b *bed) scrapeManagerMetrics(t *testing.T) string {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "scraper"}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "stepwise-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	b.create(t, sa, crb)
	tr, err := b.Clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var target string
	g.Eventually(func(g gomega.Gomega) {
		slices, err := b.Clientset.DiscoveryV1().EndpointSlices(managerNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=stepwise-manager-metrics"})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		target = ""
		for _, s := range slices.Items {
			var port int32
			for _, p := range s.Ports {
				if p.Port != nil {
					port = *p.Port
				}
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready && len(ep.Addresses) > 0 && port != 0 {
					target = net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))
				}
			}
		}
		g.Expect(target).NotTo(gomega.BeEmpty(), "a ready endpoint of Service stepwise-manager-metrics")
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed())

	tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: nil,
		// The manager serves metrics with a self-signed certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test, self-signed
	}}
	get := func(token string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+target+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := tlsClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	var body string
	g.Eventually(func(g gomega.Gomega) {
		code, b, err := get(tr.Status.Token)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(code).To(gomega.Equal(http.StatusOK), "GET /metrics with the reader's token: %s", b)
		body = b
	}, time.Minute, time.Second).Should(gomega.Succeed())
	code, _, err := get("")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(code).To(gomega.BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "GET /metrics without a token")
	return body
}
