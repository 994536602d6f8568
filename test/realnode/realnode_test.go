package realnode

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestRealNode runs Stepwise as users install it, on a real kubelet and
// containerd, and drives its stories on real containers. The subtests
// share one node (starting it takes most of a minute) and run in order.
func TestRealNode(t *testing.T) {
	// The harness manager of SimulatorFaithful logs through controller-runtime.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	b := startBed(t)

	t.Run("InstallFromRelease", func(t *testing.T) { testInstall(t, b) })
	if t.Failed() {
		t.FailNow()
	}
	t.Run("InPlaceImageUpdate", func(t *testing.T) { testInPlaceImageUpdate(t, b) })
	t.Run("EnvChangeRecreates", func(t *testing.T) { testEnvChangeRecreates(t, b) })
	t.Run("InPlaceOnlyRefusesEnvChange", func(t *testing.T) { testInPlaceOnlyRefuses(t, b) })
	t.Run("RolloutWithPrometheus", func(t *testing.T) { testRolloutWithPrometheus(t, b) })
	t.Run("TrafficThroughTraefik", func(t *testing.T) { testTrafficThroughTraefik(t, b) })
	t.Run("ManagerFailover", func(t *testing.T) { testFailover(t, b) })
	t.Run("SimulatorFaithful", func(t *testing.T) { testSimulatorFaithful(t, b) })
	t.Run("SideBySide", func(t *testing.T) { testSideBySide(t, b) })
	// Last: it stops the cluster-wide manager while it runs (and starts it
	// again).
	t.Run("NamespacedInstall", func(t *testing.T) { testNamespacedInstall(t, b) })
}

func testEnvChangeRecreates(t *testing.T, b *bed) {
	ns := b.namespace(t, "envchange")
	const name = "web"
	b.create(t, demoCloneSet(ns, name, "v1", 1, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))
	b.waitSettled(t, ns, name, 1, 2*time.Minute)
	g := gomega.NewWithT(t)
	old := b.pods(g, ns)[0]
	b.mutate(t, ns, name, func(cs *stepwisev1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
	})
	b.waitSettled(t, ns, name, 1, 2*time.Minute)
	g.Eventually(func(g gomega.Gomega) {
		pods := b.pods(g, ns)
		g.Expect(pods).To(gomega.HaveLen(1))
		p := pods[0]
		g.Expect(p.UID).NotTo(gomega.Equal(old.UID), "the Pod is recreated")
		g.Expect(p.Spec.Containers[0].Env).To(gomega.ContainElement(corev1.EnvVar{Name: "MODE", Value: "fast"}))
		g.Expect(containerStatus(&p, "app").RestartCount).To(gomega.BeZero())
		g.Expect(containerStatus(&p, "app").Ready).To(gomega.BeTrue())
	}, 30*time.Second, 250*time.Millisecond).Should(gomega.Succeed())
	// The old Pod is gone from the node, not only from the API.
	g.Eventually(func(g gomega.Gomega) {
		var list corev1.PodList
		g.Expect(b.client.List(t.Context(), &list, client.InNamespace(ns))).To(gomega.Succeed())
		for _, p := range list.Items {
			g.Expect(p.UID).NotTo(gomega.Equal(old.UID))
		}
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed())
}

func testInPlaceOnlyRefuses(t *testing.T, b *bed) {
	ns := b.namespace(t, "envonly")
	const name = "web"
	b.create(t, demoCloneSet(ns, name, "v1", 1, stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType))
	b.waitSettled(t, ns, name, 1, 2*time.Minute)
	g := gomega.NewWithT(t)
	old := b.pods(g, ns)[0]
	oldInstance, err := askInstance(old.Status.PodIP)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	b.mutate(t, ns, name, func(cs *stepwisev1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
	})
	g.Eventually(func(g gomega.Gomega) {
		cs := &stepwisev1.CloneSet{}
		g.Expect(b.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, cs)).To(gomega.Succeed())
		cond := apimeta.FindStatusCondition(cs.Status.Conditions, stepwisev1.FailedUpdateCondition)
		g.Expect(cond).NotTo(gomega.BeNil())
		g.Expect(cond.Status).To(gomega.Equal(metav1.ConditionTrue))
		g.Expect(cond.Message).To(gomega.ContainSubstring("env"))
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed())
	g.Consistently(func(g gomega.Gomega) {
		pods := b.pods(g, ns)
		g.Expect(pods).To(gomega.HaveLen(1))
		p := pods[0]
		g.Expect(p.UID).To(gomega.Equal(old.UID), "no Pod is recreated under InPlaceOnly")
		g.Expect(containerStatus(&p, "app").ContainerID).To(gomega.Equal(containerStatus(&old, "app").ContainerID))
		in, err := askInstance(p.Status.PodIP)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(in.Instance).To(gomega.Equal(oldInstance.Instance), "the app process is the same")
	}, 5*time.Second, time.Second).Should(gomega.Succeed())
}

// testInPlaceImageUpdate: an image change with InPlaceIfPossible restarts
// the app container in the same Pod: same UID and IP, a new containerID,
// restartCount+1, a new process (instance id), the sidecar untouched, and
// the Pod out of the Service from before the image patch until the new
// container is ready.
func testInPlaceImageUpdate(t *testing.T, b *bed) {
	ns := b.namespace(t, "inplace")
	const name = "web"
	b.create(t, demoService(ns, name), demoCloneSet(ns, name, "v1", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))
	b.waitSettled(t, ns, name, 2, 2*time.Minute)

	g := gomega.NewWithT(t)
	before := map[string]corev1.Pod{}
	instances := map[string]instance{}
	for _, p := range b.pods(g, ns) {
		before[p.Name] = p
		in, err := askInstance(p.Status.PodIP)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "asking Pod %s at %s", p.Name, p.Status.PodIP)
		g.Expect(in.Version).To(gomega.Equal("v1"))
		instances[p.Name] = in
	}
	g.Expect(before).To(gomega.HaveLen(2))

	tl := b.watchTimeline(t, ns)
	// allInService: the watch shows every Pod a ready endpoint. The
	// EndpointSlice follows the Pods' readiness a little after the
	// CloneSet's status does, before the patch as after it.
	allInService := func(g gomega.Gomega) {
		recs := tl.sorted()
		for _, p := range before {
			states := inService(recs, p.Status.PodIP)
			g.Expect(states).NotTo(gomega.BeEmpty())
			g.Expect(states[len(states)-1].ready).To(gomega.BeTrue(), "Pod %s in the Service", p.Name)
		}
	}
	g.Eventually(allInService, 30*time.Second, 50*time.Millisecond).Should(gomega.Succeed())
	b.mutate(t, ns, name, func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = DemoImage + ":v2" })
	b.waitSettled(t, ns, name, 2, 2*time.Minute)
	g.Eventually(allInService, 30*time.Second, 200*time.Millisecond).Should(gomega.Succeed())
	tl.stop()
	recs := tl.sorted()

	for _, p := range b.pods(g, ns) {
		old, ok := before[p.Name]
		g.Expect(ok).To(gomega.BeTrue(), "Pod %s is new: the update recreated instead of updating in place", p.Name)
		g.Expect(p.UID).To(gomega.Equal(old.UID), "Pod %s UID", p.Name)
		g.Expect(p.Status.PodIP).To(gomega.Equal(old.Status.PodIP), "Pod %s IP", p.Name)
		app, oldApp := containerStatus(&p, "app"), containerStatus(&old, "app")
		g.Expect(app.ContainerID).NotTo(gomega.Equal(oldApp.ContainerID), "Pod %s app containerID", p.Name)
		g.Expect(app.RestartCount).To(gomega.Equal(oldApp.RestartCount+1), "Pod %s app restartCount", p.Name)
		g.Expect(app.ImageID).NotTo(gomega.Equal(oldApp.ImageID), "Pod %s app imageID", p.Name)
		g.Expect(app.Ready).To(gomega.BeTrue())
		side, oldSide := containerStatus(&p, "sidecar"), containerStatus(&old, "sidecar")
		g.Expect(side.ContainerID).To(gomega.Equal(oldSide.ContainerID), "Pod %s sidecar restarted", p.Name)
		g.Expect(side.RestartCount).To(gomega.BeZero())

		in, err := askInstance(p.Status.PodIP)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(in.Version).To(gomega.Equal("v2"))
		g.Expect(in.Instance).NotTo(gomega.Equal(instances[p.Name].Instance), "Pod %s: the old process still answers", p.Name)
		g.Expect(in.Started).To(gomega.BeTemporally(">", instances[p.Name].Started))

		assertDrainedAroundPatch(t, recs, p.Name, p.Status.PodIP)
	}
}

// assertDrainedAroundPatch checks, in revision order, that the Pod was a
// ready endpoint before its image patch, was not one at the write that put
// the new image into its spec, and stayed out until the write that reported
// the new container ready.
func assertDrainedAroundPatch(t *testing.T, recs []record, pod, ip string) {
	t.Helper()
	var patchRV, readyRV int64
	for _, r := range recs {
		if r.pod == nil || r.pod.Name != pod {
			continue
		}
		if patchRV == 0 && imageOf(r.pod, "app") == DemoImage+":v2" {
			patchRV = r.rv
		}
		if patchRV != 0 && readyRV == 0 {
			s := containerStatus(r.pod, "app")
			if s.Ready && s.Image == DemoImage+":v2" {
				readyRV = r.rv
			}
		}
	}
	if patchRV == 0 || readyRV == 0 {
		t.Fatalf("Pod %s: image patch at revision %d, new container ready at %d: not both seen", pod, patchRV, readyRV)
	}
	states := inService(recs, ip)
	if !slices.ContainsFunc(states, func(s serviceState) bool { return s.ready && s.rv < patchRV }) {
		t.Fatalf("Pod %s was never a ready endpoint before its image patch (revision %d): %+v", pod, patchRV, states)
	}
	for _, s := range states {
		if s.rv < patchRV {
			continue
		}
		if s.rv > readyRV {
			break
		}
		if s.ready {
			t.Errorf("Pod %s was a ready endpoint at revision %d, between its image patch (%d) and its new container's readiness (%d)", pod, s.rv, patchRV, readyRV)
		}
	}
	var lastBefore *serviceState
	for i := range states {
		if states[i].rv < patchRV {
			lastBefore = &states[i]
		}
	}
	if lastBefore == nil || lastBefore.ready {
		t.Errorf("Pod %s was still a ready endpoint when its image was patched (revision %d): %+v", pod, patchRV, lastBefore)
	}
}

// testInstall installs the release's install.yaml, whose image is the
// release's index by digest, imported from its tarball.
func testInstall(t *testing.T, b *bed) {
	pinned := b.install(t)
	if !strings.Contains(pinned, "@sha256:") {
		t.Fatalf("install.yaml runs the manager from %s, not pinned by digest", pinned)
	}
	g := gomega.NewWithT(t)
	pods := b.managerPods(g)
	g.Expect(pods).To(gomega.HaveLen(1))
	p := pods[0]
	g.Expect(p.Spec.NodeName).To(gomega.Equal(NodeName))
	g.Expect(p.Spec.ServiceAccountName).To(gomega.Equal("stepwise-manager"))
	s := containerStatus(&p, "manager")
	g.Expect(s.Ready).To(gomega.BeTrue())
	g.Expect(p.Spec.Containers[0].Image).To(gomega.Equal(pinned))
	// The container runs the index imported from the release's tarball,
	// which containerd knows by the digest install.yaml pins.
	g.Expect(s.ImageID).To(gomega.Equal(pinned), "the manager's imageID")
	g.Expect(s.RestartCount).To(gomega.BeZero(), "the manager restarted: liveness failed or it crashed")
	g.Expect(p.Spec.Containers[0].LivenessProbe).NotTo(gomega.BeNil())
	g.Expect(p.Spec.Containers[0].ReadinessProbe).NotTo(gomega.BeNil())
	// Leader election is on: the Pod holds the Lease.
	g.Eventually(func(g gomega.Gomega) {
		g.Expect(b.leaseHolder(g)).To(gomega.HavePrefix(p.Name + "_"))
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed())
	// Metrics through the Service: its endpoint is the Pod, which answers
	// HTTPS /metrics to a token bound to stepwise-metrics-reader (the
	// manager asks the API server, under its own RBAC, whether to).
	body := b.scrapeManagerMetrics(t)
	g.Expect(body).To(gomega.ContainSubstring("controller_runtime_reconcile_total"))
}
