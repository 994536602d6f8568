package realnode

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/compare"
	"github.com/stepwise-dev/stepwise/test/kruise"
)

var (
	sideBySidePods   = flag.Int("sidebyside-pods", 6, "SideBySide: Pods per controller (make bench-node runs 40)")
	sideBySideReport = flag.String("sidebyside-report", "", "SideBySide: write the Markdown tables here")
	sideBySideSVG    = flag.String("sidebyside-svg", "", "SideBySide: write the chart here")
)

// sideBySide is one controller the side by side runs: the workload kind
// that carries the same Pod template, as a user would write it.
type sideBySide struct {
	key, name  string
	apiVersion string
	kind       string
	strategy   func(spec map[string]any)
	inPlace    bool
}

// The same rollout limit everywhere: a quarter of the Pods unavailable at
// once; a Deployment keeps its default surge of a quarter more.
var sideBySides = []sideBySide{
	{key: "stepwise", name: "Stepwise CloneSet, in place", apiVersion: stepwisev1.GroupVersion.String(), kind: "CloneSet", inPlace: true,
		strategy: func(spec map[string]any) {
			spec["updateStrategy"] = map[string]any{"type": "InPlaceIfPossible", "maxUnavailable": "25%"}
		}},
	{key: "deployment", name: "Deployment, rolling update", apiVersion: "apps/v1", kind: "Deployment",
		strategy: func(spec map[string]any) {
			spec["strategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "25%", "maxSurge": "25%"}}
		}},
	{key: "statefulset", name: "StatefulSet, rolling update", apiVersion: "apps/v1", kind: "StatefulSet",
		strategy: func(spec map[string]any) {
			spec["serviceName"] = "web"
			spec["podManagementPolicy"] = string(appsv1.ParallelPodManagement)
			spec["updateStrategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "25%"}}
		}},
	{key: "kruise", name: "OpenKruise CloneSet, in place", apiVersion: kruise.CloneSets.GroupVersion().String(), kind: "CloneSet", inPlace: true,
		strategy: func(spec map[string]any) {
			spec["updateStrategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{
				"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "25%", "maxSurge": int64(0)}}
		}},
}

// imageCase is one image change every controller makes.
type imageCase struct {
	title string
	// tag is the new image's tag for controller key.
	tag func(key string) string
	// topLayer: the image is loaded into containerd just before the change,
	// with every layer but its top one already there.
	topLayer bool
}

var imageCases = []imageCase{
	{title: "New image already on the node", tag: func(string) string { return "v2" }},
	{title: "New image sharing all but its top layer with the old one", tag: func(key string) string { return "v3-" + key }, topLayer: true},
}

const sideBySideEdge = "sbs-edge"

// testSideBySide makes the same image change of a two-container Pod (the
// demo app and a sidecar, an emptyDir written before the change) with
// Stepwise's CloneSet in place, a Deployment, a StatefulSet and
// OpenKruise's CloneSet in place, one after the other on this node, under a
// steady stream of requests through Traefik, and reports what each cost.
// What must hold: every controller gets there; the in-place ones keep every
// Pod's IP, sandbox, sidecar and volume; Stepwise fails no request.
func testSideBySide(t *testing.T, b *bed) {
	n := *sideBySidePods
	b.installGatewayAPI(t)
	tr := b.startTraefik(t)
	b.namespace(t, sideBySideEdge)
	b.create(t, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "traefik"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: TraefikControllerName},
	}, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: sideBySideEdge, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "traefik",
			Listeners: []gatewayv1.Listener{{Name: "web", Port: gatewayv1.PortNumber(tr.Port), Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}}}},
		},
	})

	images := filepath.Join(t.TempDir(), "top-layer-images.tar")
	var tags []string
	for _, c := range sideBySides {
		tags = append(tags, imageCases[1].tag(c.key))
	}
	root, err := envtestenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := BuildTopLayerImages(t.Context(), root, images, tags); err != nil {
		t.Fatal(err)
	}

	results := make([][]compare.NodeResult, len(imageCases))
	for _, c := range sideBySides {
		ok := t.Run(c.key, func(t *testing.T) {
			if c.key == "kruise" {
				b.startKruise(t)
			}
			for i, r := range b.runSideBySide(t, tr, c, n, images) {
				results[i] = append(results[i], r)
			}
		})
		if !ok {
			return
		}
	}
	b.reportSideBySide(t, n, results)
}

// runSideBySide creates controller c's workload of n Pods on v1, makes each
// image change, checks what it kept, and deletes the workload again.
func (b *bed) runSideBySide(t *testing.T, tr *Traefik, c sideBySide, n int, topLayerImages string) []compare.NodeResult {
	ns := b.namespace(t, "sbs-"+c.key)
	host := c.key + ".sbs"
	b.create(t, demoService(ns, "web"), &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Namespace: ptr.To(gatewayv1.Namespace(sideBySideEdge)), Name: "edge"}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.HTTPRouteRule{{
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: ptr.To[gatewayv1.PortNumber](80)}}}},
			}},
		},
	})
	w := sideBySideWorkload(t, c, ns, n, DemoImage+":v1")
	b.create(t, w)
	defer b.deleteSideBySide(t, w)

	f := b.followPods(t, ns)
	defer f.stop()
	g := gomega.NewWithT(t)
	g.Eventually(func() int { return f.readyOn(DemoImage + ":v1") }, 5*time.Minute, 250*time.Millisecond).Should(gomega.Equal(n), "Pods ready on v1")
	g.Eventually(func(g gomega.Gomega) {
		expectRouteAccepted(g, b, ns, "web")
		for range 10 {
			code, err := tr.get(host)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(code).To(gomega.Equal(http.StatusOK))
		}
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed(), "requests through traefik to %s", host)

	var out []compare.NodeResult
	for _, ic := range imageCases {
		image := DemoImage + ":" + ic.tag(c.key)
		if ic.topLayer {
			began := time.Now()
			if err := b.Ctr(t.Context(), "images", "import", "--no-unpack", topLayerImages); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: top-layer images imported (not unpacked) in %s", c.name, time.Since(began).Round(time.Millisecond))
		}
		r := b.measureChange(t, tr, f, c, w, n, image)
		var tl strings.Builder
		compare.WriteTimeline(&tl, "where the time went:", f.timelineSummary())
		t.Logf("%s, %s: %+v\n%s", c.name, ic.title, r, tl.String())
		if r.Wall < 0 {
			t.Fatalf("%s: not all %d Pods updated and ready on %s", c.name, n, image)
		}
		if c.inPlace {
			g.Expect(r.IPsChanged).To(gomega.BeZero(), "Pod IPs changed in place")
			g.Expect(r.SandboxesCreated).To(gomega.BeZero(), "sandboxes created in place")
			g.Expect(r.SidecarsRestarted).To(gomega.BeZero(), "sidecars restarted in place")
			g.Expect(r.VolumesLost).To(gomega.BeZero(), "emptyDir data lost in place")
		} else {
			// A recreate loses all of it; measured, so the measure is checked.
			g.Expect(r.IPsChanged).To(gomega.Equal(n), "Pod IPs changed by a recreate")
			g.Expect(r.SandboxesCreated).To(gomega.Equal(n), "sandboxes created by a recreate")
			g.Expect(r.VolumesLost).To(gomega.Equal(n), "emptyDir data lost by a recreate")
		}
		if c.key == "stepwise" {
			g.Expect(r.Failed).To(gomega.BeZero(), "requests failed through traefik while Stepwise updated in place")
		}
		out = append(out, r)
	}
	return out
}

// measureChange patches the app container's image and follows the Pods
// until all n are ready on it.
func (b *bed) measureChange(t *testing.T, tr *Traefik, f *podFollower, c sideBySide, w *unstructured.Unstructured, n int, image string) compare.NodeResult {
	ctx := t.Context()
	before := map[string]corev1.Pod{}
	for _, p := range f.pods() {
		before[p.Name] = p
	}
	kubelet, containerd := daemonCPU(t)
	load := tr.steadyLoad(c.key + ".sbs")
	start := f.begin(n, image)
	patch := fmt.Appendf(nil, `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q}]`, image)
	if err := b.client.Patch(ctx, w.DeepCopy(), client.RawPatch(types.JSONPatchType, patch)); err != nil {
		t.Fatalf("changing the image of %s: %v", c.name, err)
	}
	timeout := max(3*time.Minute, time.Duration(n)*6*time.Second)
	deadline := time.Now().Add(timeout)
	for !f.done() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	wall := f.wall()
	sent, failed := load.stop()
	kubeletAfter, containerdAfter := daemonCPU(t)

	r := compare.NodeResult{Name: c.name, Pods: n, Wall: wall, FirstReady: f.firstReady(), Unavailable: f.unavailable(wall),
		Requests: sent, Failed: failed, KubeletCPU: kubeletAfter - kubelet, ContainerdCPU: containerdAfter - containerd}
	for _, p := range f.pods() {
		old, ok := before[p.Name]
		if !ok || old.Status.PodIP != p.Status.PodIP {
			r.IPsChanged++
		}
		if !ok || containerStatus(&old, "sidecar").ContainerID != containerStatus(&p, "sidecar").ContainerID {
			r.SidecarsRestarted++
		}
		in, err := askInstance(p.Status.PodIP)
		if err != nil {
			t.Fatalf("asking Pod %s: %v", p.Name, err)
		}
		if in.FirstInstance == in.Instance {
			r.VolumesLost++
		}
	}
	r.SandboxesCreated = b.sandboxesSince(t, w.GetNamespace(), start)
	return r
}

// sideBySideWorkload is controller c's workload of n Pods of the demo app
// on image with a sidecar; the app writes a marker into an emptyDir when
// it first starts (DATA_DIR) and waits 3 s before it stops (preStop), the
// time Traefik may take to learn that a Pod left the endpoints.
func sideBySideWorkload(t *testing.T, c sideBySide, ns string, n int, image string) *unstructured.Unstructured {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(10)),
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Env:             []corev1.EnvVar{{Name: "DATA_DIR", Value: "/data"}},
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
					PeriodSeconds: 1,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}},
			}, {
				Name:            "sidecar",
				Image:           SandboxImage,
				ImagePullPolicy: corev1.PullNever,
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	template, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{
		"replicas": int64(n),
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
		"template": template,
	}
	c.strategy(spec)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": c.apiVersion, "kind": c.kind, "spec": spec}}
	u.SetNamespace(ns)
	u.SetName("web")
	return u
}

// deleteSideBySide deletes the workload and waits for its Pods to be gone
// from the node, so that the next controller has the node to itself.
func (b *bed) deleteSideBySide(t *testing.T, w *unstructured.Unstructured) {
	ctx := context.Background()
	if err := b.client.Delete(ctx, w.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Errorf("deleting %s %s/%s: %v", w.GetKind(), w.GetNamespace(), w.GetName(), err)
		return
	}
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		var list corev1.PodList
		g.Expect(b.client.List(ctx, &list, client.InNamespace(w.GetNamespace()))).To(gomega.Succeed())
		g.Expect(list.Items).To(gomega.BeEmpty())
	}, 3*time.Minute, time.Second).Should(gomega.Succeed(), "the Pods of %s gone", w.GetNamespace())
}

// reportSideBySide prints the tables and writes them, and the chart, where
// the flags say.
func (b *bed) reportSideBySide(t *testing.T, n int, results [][]compare.NodeResult) {
	var out strings.Builder
	fmt.Fprintf(&out, "The same image change of %d Pods (app + sidecar) on one real kubelet + containerd node, %s; maxUnavailable 25%% everywhere (the Deployment surges 25%%); a request through Traefik every 20 ms.\n",
		n, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	cases := make([]compare.NodeCase, len(imageCases))
	for i, ic := range imageCases {
		compare.WriteNodeTable(&out, ic.title+":", results[i])
		cases[i] = compare.NodeCase{Title: ic.title, Results: results[i]}
	}
	t.Log("\n" + out.String())
	if *sideBySideReport != "" {
		if err := os.WriteFile(*sideBySideReport, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if *sideBySideSVG != "" {
		var svg strings.Builder
		if err := compare.WriteNodeSVG(&svg, fmt.Sprintf("Image change of %d Pods on one real node", n), cases); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*sideBySideSVG, []byte(svg.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
