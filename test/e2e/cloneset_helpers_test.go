package e2e

import (
	"context"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
)

// bed is one kwok cluster with the Stepwise manager running in-process, as
// it runs in a cluster: the shipped setup, authenticated as its
// ServiceAccount with the RBAC of config/rbac, electing a leader with the
// leader-election Role. Tests assert with an admin client.
type bed struct {
	cluster *kwokcluster.Cluster
	client  client.Client
	// managerCfg authenticates as the manager's ServiceAccount.
	managerCfg *rest.Config

	mu      sync.Mutex
	manager *harness.Manager
}

func newBed(t *testing.T, nodes int) *bed {
	t.Helper()
	b := newBedWithoutManager(t, nodes)
	b.startManager(t)
	t.Cleanup(b.stopManager)
	return b
}

// sideStory is one story of a test whose stories share env.
type sideStory[E any] struct {
	name string
	run  func(*testing.T, E)
}

// runSideBySide runs the stories as parallel subtests of t on one env, each
// in a namespace of its own: most of a story is waiting (pauses, restarts,
// Prometheus windows). They start in the order given, so the longest go
// first.
func runSideBySide[E any](t *testing.T, env E, stories []sideStory[E]) {
	for _, story := range stories {
		t.Run(story.name, func(t *testing.T) {
			t.Parallel()
			story.run(t, env)
		})
	}
}

// newBedWithoutManager is a kwok cluster with the shipped RBAC installed
// and no manager: for a test that runs the manager itself (as a process).
func newBedWithoutManager(t *testing.T, nodes int) *bed {
	t.Helper()
	// STEPWISE_E2E_LOG=FILE keeps the manager's debug log for a failed run.
	if path := os.Getenv("STEPWISE_E2E_LOG"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		ctrl.SetLogger(zap.New(zap.WriteTo(f), zap.UseDevMode(true)))
	}
	cluster := kwokcluster.StartForTest(t, kwokcluster.Options{Nodes: nodes})
	c, err := harness.NewClient(cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	managerCfg, err := shippedrbac.ManagerConfig(t.Context(), cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	requireRBACEnforced(t, managerCfg)
	return &bed{cluster: cluster, client: c, managerCfg: managerCfg}
}

func (b *bed) startManager(t *testing.T) {
	t.Helper()
	m, err := harness.StartManager(context.Background(), b.managerCfg, manager.Options{
		LeaderElection:          true,
		LeaderElectionNamespace: shippedrbac.Namespace,
	})
	if err != nil {
		t.Fatalf("starting manager: %v", err)
	}
	b.mu.Lock()
	b.manager = m
	b.mu.Unlock()
}

// requireRBACEnforced fails the test unless the cluster refuses the
// manager's ServiceAccount what its role does not grant: a bed that allowed
// everything would prove nothing about the role.
func requireRBACEnforced(t *testing.T, managerCfg *rest.Config) {
	t.Helper()
	c, err := harness.NewClient(managerCfg)
	if err != nil {
		t.Fatal(err)
	}
	var secrets corev1.SecretList
	if err := c.List(t.Context(), &secrets, client.InNamespace(metav1.NamespaceDefault)); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as the manager's ServiceAccount: %v, want Forbidden: the test cluster does not enforce RBAC", err)
	}
}

// currentManager is the running manager, for its metrics.
func (b *bed) currentManager() *harness.Manager {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.manager
}

func (b *bed) stopManager() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.manager != nil {
		b.manager.Stop()
		b.manager = nil
	}
}

func (b *bed) namespace(t *testing.T, prefix string) string {
	t.Helper()
	name, err := b.cluster.CreateUniqueNamespace(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// cloneSet is a CloneSet with one container "app" on image app:v1.
func cloneSet(ns, name string, replicas int32, strategy stepwisev1.CloneSetUpdateStrategyType) *stepwisev1.CloneSet {
	// Separate maps: a test that adds template labels must not widen the selector.
	selector := map[string]string{"app": name}
	labels := map[string]string{"app": name}
	return &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1"}},
				},
			},
			UpdateStrategy: stepwisev1.CloneSetUpdateStrategy{Type: strategy, MaxUnavailable: intOrString("100%")},
		},
	}
}

func intOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// mutate changes the CloneSet with conflict retries.
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

func (b *bed) get(g gomega.Gomega, ns, name string) *stepwisev1.CloneSet {
	cs := &stepwisev1.CloneSet{}
	g.Expect(b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs)).To(gomega.Succeed())
	return cs
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
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	return live
}

// waitSettled waits until the CloneSet observed its generation and every
// Pod it wants is ready, with updatedReady as asked.
func (b *bed) waitSettled(t *testing.T, ns, name string, replicas, updatedReady int32, timeout time.Duration) *stepwisev1.CloneSet {
	t.Helper()
	var got *stepwisev1.CloneSet
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		got = b.get(g, ns, name)
		g.Expect(got.Status.ObservedGeneration).To(gomega.Equal(got.Generation))
		g.Expect(got.Status.Replicas).To(gomega.Equal(replicas), "replicas")
		g.Expect(got.Status.ReadyReplicas).To(gomega.Equal(replicas), "readyReplicas")
		g.Expect(got.Status.UpdatedReadyReplicas).To(gomega.Equal(updatedReady), "updatedReadyReplicas")
		g.Expect(got.Status.UpdatedReplicas).To(gomega.Equal(updatedReady), "updatedReplicas")
	}, timeout, 200*time.Millisecond).Should(gomega.Succeed())
	return got
}

// waitCurrentRevision waits for CloneSet name's status.currentRevision to
// be revision. A governed CloneSet moves it once its Rollout made the
// revision stable, a round after the Pods settled.
func (b *bed) waitCurrentRevision(t *testing.T, ns, name, revision string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		g.Expect(b.get(g, ns, name).Status.CurrentRevision).To(gomega.Equal(revision), "the CloneSet's current revision followed")
	}, settleTimeout, 200*time.Millisecond).Should(gomega.Succeed())
}

// podSnapshot is what must survive an in-place update.
type podSnapshot struct {
	UID, IP, Node string
}

func snapshot(pods []corev1.Pod) map[string]podSnapshot {
	out := map[string]podSnapshot{}
	for _, p := range pods {
		out[p.Name] = podSnapshot{UID: string(p.UID), IP: p.Status.PodIP, Node: p.Spec.NodeName}
	}
	return out
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func imageOf(pod *corev1.Pod, container string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// podWatcher records, from a watch, every state each Pod of a namespace
// went through, so a test can assert on what happened between two looks.
type podWatcher struct {
	mu     sync.Mutex
	latest map[string]*corev1.Pod
	// maxUnready is the most Pods not ready at one time since start.
	maxUnready int
	// gateFalse records which Pods were ever seen with InPlaceUpdateReady False.
	gateFalse map[string]bool
	// imagePatchedAt is when each Pod was first seen with the target image.
	imagePatchedAt map[string]time.Time
	// gateFalseAt is when each Pod was first seen with the gate False.
	gateFalseAt map[string]time.Time
	target      string
	stop        func()
}

func (b *bed) watchPods(t *testing.T, ns, targetImage string) *podWatcher {
	t.Helper()
	w, err := b.cluster.Clientset().CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pw := &podWatcher{latest: map[string]*corev1.Pod{}, gateFalse: map[string]bool{}, imagePatchedAt: map[string]time.Time{}, gateFalseAt: map[string]time.Time{}, target: targetImage, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.observe(ev.Type, pod)
		}
	}()
	t.Cleanup(w.Stop)
	return pw
}

func (pw *podWatcher) observe(kind watch.EventType, pod *corev1.Pod) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	now := time.Now()
	if kind == watch.Deleted {
		delete(pw.latest, pod.Name)
	} else {
		pw.latest[pod.Name] = pod
	}
	if podCondition(pod, stepwisev1.InPlaceUpdateReady) == corev1.ConditionFalse {
		pw.gateFalse[pod.Name] = true
		if _, ok := pw.gateFalseAt[pod.Name]; !ok {
			pw.gateFalseAt[pod.Name] = now
		}
	}
	if pw.target != "" && imageOf(pod, "app") == pw.target {
		if _, ok := pw.imagePatchedAt[pod.Name]; !ok {
			pw.imagePatchedAt[pod.Name] = now
		}
	}
	unready := 0
	for _, p := range pw.latest {
		if p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
			unready++
		}
	}
	pw.maxUnready = max(pw.maxUnready, unready)
}

func (pw *podWatcher) snapshot() (maxUnready int, gateFalse map[string]bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := map[string]bool{}
	for k, v := range pw.gateFalse {
		out[k] = v
	}
	return pw.maxUnready, out
}

func (b *bed) events(g gomega.Gomega, ns, reason string) []string {
	var list corev1.EventList
	g.Expect(b.client.List(context.Background(), &list, client.InNamespace(ns))).To(gomega.Succeed())
	var msgs []string
	for _, e := range list.Items {
		if e.Reason == reason {
			msgs = append(msgs, e.Message)
		}
	}
	return msgs
}
