package realnode

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
)

// Requests measured per step. Traefik's weighted round robin is smooth, so
// 200 requests land within a request or two of the weight; the tolerance
// is what "within a few percent" means here.
const (
	sharedRequests  = 200
	headerRequests  = 50
	shareTolerance  = 5.0 // percentage points
	canaryHeader    = "x-canary"
	canaryHeaderVal = "always"
)

// testTrafficThroughTraefik: Traefik, on this machine, is the Gateway API
// implementation. Real requests through its entryPoint on 127.0.0.1 reach
// the demo app's Pods on the bridge; at each step of a rollout the canary's
// share of them is the step's weight, a request with the step's header
// always reaches the canary, no request reaches a stopping container while
// Pods restart in place (and none fails at all until the last step), and
// after promotion every request reaches the new version. A step
// waits for Traefik's Accepted on the route: with Traefik stopped, the next
// step's weight is written but the step is not reached.
func testTrafficThroughTraefik(t *testing.T, b *bed) {
	g := gomega.NewWithT(t)
	b.installGatewayAPI(t)
	tr := b.startTraefik(t)

	ns := b.namespace(t, "traffic")
	gc := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "traefik"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: TraefikControllerName},
	}
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "traefik",
			// Traefik serves a listener on the entryPoint with its port.
			Listeners: []gatewayv1.Listener{{Name: "web", Port: gatewayv1.PortNumber(tr.Port), Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
			Rules: []gatewayv1.HTTPRouteRule{{
				Name:        ptr.To[gatewayv1.SectionName]("app"),
				Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: ptr.To[gatewayv1.PortNumber](80)}}}},
			}},
		},
	}
	cs := demoCloneSet(ns, "web", "v1", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	// The CloneSet's grace period is the default, 0, as a new user leaves
	// it. Traefik runs with its defaults too: it applies what it learns at
	// most every 2 s (providersThrottleDuration), so a Pod that left the
	// endpoints can get requests that long; the Rollout's trafficRouting
	// makes the CloneSet wait gatewayDrainSeconds (3 s) before patching an
	// image, and the request stream below allows no failed request.
	cs.Spec.UpdateStrategy.InPlaceUpdateStrategy.GracePeriodSeconds = 0
	b.create(t, gc, gw, demoService(ns, "web"), route, cs)
	b.waitSettled(t, ns, "web", 2, 2*time.Minute)

	// Traefik accepts the class, the Gateway and the route.
	g.Eventually(func(g gomega.Gomega) {
		got := &gatewayv1.GatewayClass{}
		g.Expect(b.client.Get(t.Context(), client.ObjectKeyFromObject(gc), got)).To(gomega.Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted))).To(gomega.BeTrue(), "GatewayClass accepted: %+v", got.Status.Conditions)
		gwNow := &gatewayv1.Gateway{}
		g.Expect(b.client.Get(t.Context(), client.ObjectKeyFromObject(gw), gwNow)).To(gomega.Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(gwNow.Status.Conditions, string(gatewayv1.GatewayConditionAccepted))).To(gomega.BeTrue(), "Gateway accepted: %+v", gwNow.Status.Conditions)
		g.Expect(apimeta.IsStatusConditionTrue(gwNow.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))).To(gomega.BeTrue(), "Gateway programmed: %+v", gwNow.Status.Conditions)
		expectRouteAccepted(g, b, ns, "web")
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed())

	// Before any release: every request, with or without the header, v1.
	g.Eventually(func(g gomega.Gomega) {
		expectAll(g, tr.request(g, 50, false), "v1")
	}, 30*time.Second, 250*time.Millisecond).Should(gomega.Succeed())
	expectAll(g, tr.request(g, headerRequests, true), "v1")

	header := stepwisev1.TrafficMatch{Header: &stepwisev1.StringMatch{Name: canaryHeader, Value: canaryHeaderVal}}
	weighted := func(weight int32) stepwisev1.RolloutStep {
		s := step("50%", 0)
		s.Traffic, s.Matches, s.Pause = ptr.To(weight), []stepwisev1.TrafficMatch{header}, &stepwisev1.StepPause{}
		return s
	}
	ro := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"},
			TrafficRouting: &stepwisev1.TrafficRouting{
				StableService: "web",
				CanaryService: stepwisev1.CanaryService{Name: "web-canary", Create: true},
				HTTPRoutes:    []stepwisev1.HTTPRouteReference{{Name: "web"}},
			},
			// One Pod on each version at both steps: 20 and 80 are not what
			// round robin over the Pods would give.
			Steps: []stepwisev1.RolloutStep{weighted(20), weighted(80), step("0", 0)},
		},
	}
	b.create(t, ro)
	d := &delivery{b: b, t: t, ns: ns}
	d.waitRollout("adopts v1", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).NotTo(gomega.BeEmpty())
	})

	// Requests keep going through Traefik while each Pod restarts in place:
	// count the ones that fail.
	during := tr.sendInBackground(t)
	v2 := d.commit("v2")
	for i, weight := range []int32{20, 80} {
		if i == 1 {
			// Traefik stopped: the next step's weight goes into the route,
			// but nothing accepts its new generation, so the step waits.
			during.stopAndLog(t, "from the commit to step 0")
			g.Expect(tr.Stop()).To(gomega.Succeed())
			b.promote(t, ns, "web")
			d.waitRollout("step 1 waits for the Gateway", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
				g.Expect(ro.Status.CurrentStepIndex).To(gomega.Equal(ptr.To[int32](1)))
				g.Expect(ro.Status.Reason).To(gomega.Equal(stepwisev1.ReasonWaitingForTraffic))
				g.Expect(ro.Status.Message).To(gomega.ContainSubstring("waiting for the routes to carry the step's traffic"))
				g.Expect(ro.Status.Message).To(gomega.MatchRegexp(`Gateway \S+ has not accepted HTTPRoute %s/web(-stepwise-canary)? generation \d+`, ns))
				g.Expect(ro.Status.Traffic).NotTo(gomega.BeNil())
				g.Expect(ro.Status.Traffic.CanaryWeight).To(gomega.Equal(weight))
				g.Expect(ro.Status.Traffic.Accepted).To(gomega.BeFalse())
			})
			g.Consistently(func(g gomega.Gomega) {
				ro := d.rollout(g)
				g.Expect(ro.Status.Reason).To(gomega.Equal(stepwisev1.ReasonWaitingForTraffic))
				g.Expect(ro.Status.Traffic.Step).NotTo(gomega.Equal(ptr.To[int32](1)))
			}, 3*time.Second, 250*time.Millisecond).Should(gomega.Succeed())
			g.Expect(tr.Start(t.Context())).To(gomega.Succeed())
		}
		d.waitRollout(fmt.Sprintf("step %d reached with weight %d", i, weight), func(g gomega.Gomega, ro *stepwisev1.Rollout) {
			g.Expect(ro.Status.CurrentStepIndex).To(gomega.Equal(ptr.To(int32(i))))
			g.Expect(ro.Status.Reason).To(gomega.Equal(stepwisev1.ReasonAwaitingPromotion))
			g.Expect(ro.Status.Traffic).NotTo(gomega.BeNil())
			g.Expect(ro.Status.Traffic.Step).To(gomega.Equal(ptr.To(int32(i))))
			g.Expect(ro.Status.Traffic.CanaryWeight).To(gomega.Equal(weight))
			g.Expect(ro.Status.Traffic.Accepted).To(gomega.BeTrue())
		})
		reached := time.Now()
		// What the Rollout waited for: Traefik's own Accepted, at the
		// routes' current generations.
		expectRouteAccepted(g, b, ns, "web")
		expectRouteAccepted(g, b, ns, "web-stepwise-canary")

		// Traefik writes the status that accepts a route before it serves
		// the route, up to its throttle (2 s) later: measure until the
		// share is the weight, and say how long that took.
		var shares map[string]int
		attempts := 0
		g.Eventually(func(g gomega.Gomega) {
			attempts++
			shares = tr.request(g, sharedRequests, false)
			expectShare(g, shares, "v2", weight)
		}, 10*time.Second, 100*time.Millisecond).Should(gomega.Succeed())
		t.Logf("step %d (weight %d): %v of %d requests, measured %s after the step was reached (attempt %d)",
			i, weight, shares, sharedRequests, time.Since(reached).Round(time.Millisecond), attempts)
		expectAll(g, tr.request(g, headerRequests, true), "v2")
		// Both versions really answer: one Pod each.
		g.Expect(shares).To(gomega.HaveKey("v1"))
		expectLocalConnections(t, tr)
	}
	during = tr.sendInBackground(t)
	b.promote(t, ns, "web")
	d.waitRollout("v2 promoted", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(gomega.Equal(v2))
	})
	b.waitSettled(t, ns, "web", 2, time.Minute)
	// The last step keeps no stable Pod: its weight left the stable
	// Service before the Pods did, so no request met an empty Service
	// (Traefik's 503 "no available server") either.
	during.stopAndLog(t, "from step 1 to promotion")
	// The route is git's again and the canary route is gone; every request,
	// with or without the header, reaches v2.
	g.Eventually(func(g gomega.Gomega) {
		r := &gatewayv1.HTTPRoute{}
		g.Expect(b.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, r)).To(gomega.Succeed())
		g.Expect(r.Spec.Rules).To(gomega.HaveLen(1))
		g.Expect(r.Spec.Rules[0].BackendRefs).To(gomega.HaveLen(1))
		g.Expect(string(r.Spec.Rules[0].BackendRefs[0].Name)).To(gomega.Equal("web"))
		err := b.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-stepwise-canary"}, &gatewayv1.HTTPRoute{})
		g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "canary route deleted: %v", err)
		expectAll(g, tr.request(g, sharedRequests, false), "v2")
	}, 30*time.Second, 250*time.Millisecond).Should(gomega.Succeed())
	expectAll(g, tr.request(g, headerRequests, true), "v2")
	expectLocalConnections(t, tr)
}

// expectLocalConnections: Traefik's connections go to loopback (the API
// server) and to Pods on the bed's bridge, nowhere else, and it holds at
// least one to a Pod (it reaches them directly, from the EndpointSlices).
func expectLocalConnections(t *testing.T, tr *Traefik) {
	t.Helper()
	addrs, err := tr.RemoteAddrs()
	if err != nil {
		t.Fatal(err)
	}
	pods := netip.MustParsePrefix(PodSubnet)
	toPods := 0
	for _, a := range addrs {
		switch {
		case a.IsLoopback():
		case pods.Contains(a) && a != netip.MustParseAddr(Gateway):
			toPods++
		default:
			t.Errorf("traefik holds a connection to %s, outside loopback and the Pods' subnet %s", a, PodSubnet)
		}
	}
	if toPods == 0 {
		t.Errorf("traefik holds no connection to a Pod: %v", addrs)
	}
}

// installGatewayAPI installs every CRD of the Gateway API standard channel
// of the sigs.k8s.io/gateway-api version go.mod requires: Traefik watches
// GRPCRoutes, ReferenceGrants and BackendTLSPolicies besides the kinds
// Stepwise uses, and waits for every informer.
func (b *bed) installGatewayAPI(t *testing.T) {
	t.Helper()
	dir, err := envtestenv.GatewayAPIStandardCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Cluster.InstallCRDs(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
}

// startTraefik runs Traefik against the bed's API server, with the bed's
// admin kubeconfig, and stops it when the test ends.
func (b *bed) startTraefik(t *testing.T) *Traefik {
	t.Helper()
	began := time.Now()
	tr, err := StartTraefik(t.Context(), TraefikOptions{Kubeconfig: b.Cluster.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("traefik listening on %s in %s; log %s", tr.Addr, time.Since(began).Round(time.Millisecond), tr.Log)
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, tr.Log, 40)
		}
		if err := tr.Stop(); err != nil {
			t.Errorf("stopping traefik: %v", err)
		}
	})
	return tr
}

// expectRouteAccepted: Traefik reports the route Accepted by Gateway edge
// at the route's current generation.
func expectRouteAccepted(g gomega.Gomega, b *bed, ns, name string) {
	r := &gatewayv1.HTTPRoute{}
	g.Expect(b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, r)).To(gomega.Succeed())
	var found bool
	for _, p := range r.Status.Parents {
		if p.ParentRef.Name != "edge" || p.ControllerName != TraefikControllerName {
			continue
		}
		c := apimeta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
		g.Expect(c).NotTo(gomega.BeNil(), "route %s: Accepted condition", name)
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue), "route %s: %s", name, c.Message)
		g.Expect(c.ObservedGeneration).To(gomega.Equal(r.Generation), "route %s: Accepted at its generation", name)
		found = true
	}
	g.Expect(found).To(gomega.BeTrue(), "route %s: status from %s for Gateway edge: %+v", name, TraefikControllerName, r.Status.Parents)
}

// trafficClient sends requests to Traefik's entryPoint on 127.0.0.1 only.
var trafficClient = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}

// request sends n requests to / through Traefik, one after another, with
// the canary header or without, and counts the versions that answered.
// Every request must be answered 200 by the demo app.
func (tr *Traefik) request(g gomega.Gomega, n int, withHeader bool) map[string]int {
	versions := map[string]int{}
	for range n {
		req, err := http.NewRequest(http.MethodGet, "http://"+tr.Addr+"/", nil)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		if withHeader {
			req.Header.Set(canaryHeader, canaryHeaderVal)
		}
		resp, err := trafficClient.Do(req)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK), "answer through traefik: %s", body)
		versions[versionOf(string(body))]++
	}
	return versions
}

// background is a stream of requests through Traefik, one every 20 ms,
// while Pods restart in place.
type background struct {
	stop   func()
	ok     int
	failed []string
}

func (tr *Traefik) sendInBackground(t *testing.T) *background {
	bg := &background{}
	bg.stop = every(20*time.Millisecond, func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+tr.Addr+"/", nil)
		resp, err := trafficClient.Do(req)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			bg.failed = append(bg.failed, fmt.Sprintf("%s %v", time.Now().Format("15:04:05.000"), err))
			return
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			bg.failed = append(bg.failed, fmt.Sprintf("%s %s: %s", time.Now().Format("15:04:05.000"), resp.Status, strings.TrimSpace(string(body))))
			return
		}
		bg.ok++
	})
	// Stopped by stopAndLog, or here when the test fails before that.
	t.Cleanup(bg.stop)
	return bg
}

// stopAndLog stops the stream and checks that no request failed: none
// reached a stopping container (that would be a 502 or a reset
// connection), because a Pod leaves the Services' endpoints, and so
// Traefik's servers, for the grace period before its container stops; and
// none was sent to a Service without endpoints (Traefik's own 503 "no
// available server").
func (bg *background) stopAndLog(t *testing.T, what string) {
	t.Helper()
	bg.stop()
	t.Logf("requests through traefik %s: %d answered 200, %d failed %v", what, bg.ok, len(bg.failed), bg.failed)
	for _, f := range bg.failed {
		t.Errorf("request through traefik %s failed: %s", what, f)
	}
	if bg.ok == 0 {
		t.Errorf("no request through traefik %s answered", what)
	}
}

// versionOf reads "version=X" from the demo app's answer.
func versionOf(body string) string {
	for f := range strings.FieldsSeq(body) {
		if v, ok := strings.CutPrefix(f, "version="); ok {
			return v
		}
	}
	return "?"
}

func expectAll(g gomega.Gomega, versions map[string]int, version string) {
	g.Expect(versions).To(gomega.HaveLen(1), "versions that answered: %v", versions)
	g.Expect(versions).To(gomega.HaveKey(version), "versions that answered: %v", versions)
}

func expectShare(g gomega.Gomega, versions map[string]int, version string, weight int32) {
	total := 0
	for _, n := range versions {
		total += n
	}
	share := 100 * float64(versions[version]) / float64(total)
	g.Expect(math.Abs(share-float64(weight))).To(gomega.BeNumerically("<=", shareTolerance),
		"%s answered %.1f%% of %d requests (%v); the weight is %d%%", version, share, total, versions, weight)
}

// promote asks the Rollout to leave its current pause, as `kubectl stepwise
// promote` does.
func (b *bed) promote(t *testing.T, ns, name string) {
	t.Helper()
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, stepwisev1.PromoteAtAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	if err := b.client.Patch(t.Context(), ro, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("promoting Rollout %s/%s: %v", ns, name, err)
	}
}
