// Package dashboard tests the dashboard's Hub on a real API server
// (envtest): what its informers gather for a Rollout, the measurements it
// keeps beyond the status's last few, and what a user limited to one
// namespace sees. No controller runs: the tests write statuses themselves.
package dashboard

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/dashboard"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/harness"
)

var (
	testEnv *envtest.Environment
	admin   client.Client
)

func TestMain(m *testing.M) {
	var cfg *rest.Config
	var stop func()
	var err error
	if testEnv, cfg, stop, err = envtestenv.StartSuite(); err == nil {
		admin, err = harness.NewClient(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// viewer is a user who may read Rollouts, CloneSets, Pods and Events in ns
// and nothing else.
func viewer(t *testing.T, ns string) *rest.Config {
	t.Helper()
	g := NewWithT(t)
	name := "viewer-" + ns
	u, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{stepwisev1.GroupVersion.Group}, Resources: []string{"rollouts", "clonesets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}
	g.Expect(admin.Create(t.Context(), role)).To(Succeed())
	g.Expect(admin.Create(t.Context(), binding)).To(Succeed())
	return u.Config()
}

func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1000000)
	NewWithT(t).Expect(admin.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

func startHub(t *testing.T, cfg *rest.Config, ns string) *dashboard.Hub {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := dashboard.NewHub(dyn, kube, ns)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// release creates a CloneSet web with 3 replicas, one Pod on each revision
// and one on none, a Rollout web at step 1 of 2 with two measurements, and
// an Event about it, writing the statuses a controller would.
func release(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	cs := &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:2"}}},
			},
		},
	}
	g.Expect(admin.Create(ctx, cs)).To(Succeed())
	cs.Status = stepwisev1.CloneSetStatus{ObservedGeneration: cs.Generation, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 1,
		UpdatedReadyReplicas: 1, UpdateRevision: "web-2", CurrentRevision: "web-1"}
	g.Expect(admin.Status().Update(ctx, cs)).To(Succeed())
	for name, rev := range map[string]string{"web-a": "web-2", "web-b": "web-1"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web", appsv1.ControllerRevisionHashLabelKey: rev}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web"}}},
		}
		g.Expect(admin.Create(ctx, pod)).To(Succeed())
	}
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}},
	}
	g.Expect(admin.Create(ctx, other)).To(Succeed())

	ro := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web"},
			Steps:       []stepwisev1.RolloutStep{{Partition: intstr.FromString("50%")}, {Partition: intstr.FromInt32(0)}},
			Analysis: &stepwisev1.AnalysisSpec{Metrics: []stepwisev1.Metric{{
				Name: "error-rate", Prometheus: &stepwisev1.PrometheusMetric{Address: "http://prometheus:9090", Query: "vector(0)"},
				ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
			}}},
		},
	}
	g.Expect(admin.Create(ctx, ro)).To(Succeed())
	now := time.Now().Truncate(time.Second)
	ro.Status = stepwisev1.RolloutStatus{
		ObservedGeneration: ro.Generation, Phase: stepwisev1.RolloutProgressing, Reason: stepwisev1.ReasonAnalysisRunning,
		CurrentStepIndex: ptr.To[int32](0), StableRevision: "web-1", CanaryRevision: "web-2",
		StepReadyAt: &metav1.Time{Time: now.Add(-time.Minute)},
		Measurements: []stepwisev1.Measurement{
			{Metric: "error-rate", Step: 0, Value: "0", Phase: stepwisev1.MeasurementSuccessful, Time: metav1.Time{Time: now.Add(-20 * time.Second)}},
			{Metric: "error-rate", Step: 0, Value: "0.001", Phase: stepwisev1.MeasurementSuccessful, Time: metav1.Time{Time: now.Add(-10 * time.Second)}},
		},
	}
	g.Expect(admin.Status().Update(ctx, ro)).To(Succeed())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "web.1"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "Rollout", Namespace: ns, Name: "web", UID: ro.UID},
		Reason:         stepwisev1.EventAnalysisStarted, Message: "step 1/2: analysis started", Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.Time{Time: now}, LastTimestamp: metav1.Time{Time: now}, Count: 1,
		Source: corev1.EventSource{Component: "stepwise"},
	}
	g.Expect(admin.Create(ctx, ev)).To(Succeed())
}

func TestHubGathersARolloutAndKeepsItsMeasurements(t *testing.T) {
	ns := namespace(t, "hub")
	release(t, ns)
	h := startHub(t, viewer(t, ns), ns)
	changes, stop := h.Subscribe()
	defer stop()
	g := NewWithT(t)

	g.Eventually(func(g Gomega) {
		l := h.List()
		g.Expect(l.Error).To(BeEmpty())
		g.Expect(l.Rollouts).To(HaveLen(1))
		s := l.Rollouts[0]
		g.Expect(s.Step).To(Equal("1/2"))
		g.Expect([]int32{s.Replicas, s.Updated, s.Ready}).To(Equal([]int32{3, 1, 3}), "counts from the CloneSet: %+v", s)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	var d *dashboard.Detail
	g.Eventually(func(g Gomega) {
		v := h.Detail(ns, "web", time.Now())
		g.Expect(v.Error).To(BeEmpty())
		g.Expect(v.Notes).To(BeEmpty())
		d = v.Rollout
		g.Expect(d.Pods).To(HaveLen(2), "the CloneSet's Pods, not the db Pod")
		g.Expect(d.Events).To(HaveLen(1))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(d.Pods[0].Name).To(Equal("web-a"))
	g.Expect(d.Pods[0].Role).To(Equal("canary"))
	g.Expect(d.Pods[1].Role).To(Equal("stable"))
	g.Expect(d.Events[0].Reason).To(Equal(stepwisev1.EventAnalysisStarted))
	g.Expect(d.Charts).To(HaveLen(1))
	g.Expect(d.Charts[0].Points).To(HaveLen(2))
	g.Expect(*d.Charts[0].Max).To(Equal(0.01))

	// The status keeps its last measurements only; the hub keeps all.
	drain(changes)
	ro := &stepwisev1.Rollout{}
	g.Expect(admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, ro)).To(Succeed())
	ro.Status.Measurements = []stepwisev1.Measurement{ro.Status.Measurements[1], {
		Metric: "error-rate", Step: 0, Value: "0.5", Phase: stepwisev1.MeasurementFailed, Time: metav1.Time{Time: time.Now().Truncate(time.Second)},
	}}
	g.Expect(admin.Status().Update(t.Context(), ro)).To(Succeed())
	g.Eventually(changes, 10*time.Second).Should(Receive(), "a subscriber hears of the change")
	g.Eventually(func(g Gomega) {
		c := h.Detail(ns, "web", time.Now()).Rollout.Charts[0]
		g.Expect(c.Points).To(HaveLen(3))
		g.Expect(c.Points[2].Phase).To(Equal("Failed"))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

func TestHubShowsOnlyWhatTheUserMayRead(t *testing.T) {
	mine, theirs := namespace(t, "mine"), namespace(t, "theirs")
	release(t, theirs)
	cfg := viewer(t, mine)
	g := NewWithT(t)

	h := startHub(t, cfg, mine)
	g.Expect(h.List().Error).To(BeEmpty())
	g.Expect(h.List().Rollouts).To(BeEmpty())
	g.Expect(h.Detail(theirs, "web", time.Now()).Error).To(Equal("this dashboard watches namespace " + mine + " only"))
	_, ok := h.Rollout(theirs, "web")
	g.Expect(ok).To(BeFalse())

	all := startHub(t, cfg, "")
	g.Eventually(func() string { return all.List().Error }, 30*time.Second, 100*time.Millisecond).Should(SatisfyAll(
		HavePrefix("cannot watch Rollouts: "), ContainSubstring("forbidden")))
	g.Expect(all.List().Rollouts).To(BeEmpty())
	g.Expect(all.Detail(theirs, "web", time.Now()).Error).To(HavePrefix("cannot watch Rollouts: "))
	g.Expect(strings.Contains(fmt.Sprint(all.List()), "web-2")).To(BeFalse())
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
