package integration

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

const timeout = 30 * time.Second

func listPods(g Gomega, ns string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(env.client.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

func getCloneSet(g Gomega, ns, name string) *stepwisev1.CloneSet {
	cs := &stepwisev1.CloneSet{}
	g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs)).To(Succeed())
	return cs
}

func TestCloneSetCreatesGatedOwnedPods(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 3)
	g.Expect(env.client.Create(context.Background(), cs)).To(Succeed())

	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(p.Spec.ReadinessGates).To(ContainElement(corev1.PodReadinessGate{ConditionType: stepwisev1.InPlaceUpdateReady}))
			g.Expect(metav1.IsControlledBy(&p, cs)).To(BeTrue())
			g.Expect(p.Labels).To(HaveKey(appsv1.ControllerRevisionHashLabelKey))
			// No kubelet here: the engine still marks a new Pod's gate True.
			g.Expect(conditionStatus(&p, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionTrue))
		}
	}, timeout).Should(Succeed())

	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Replicas).To(BeEquivalentTo(3))
		g.Expect(got.Status.UpdatedReplicas).To(BeEquivalentTo(3))
		// Not Running: nothing is ready, and status says so.
		g.Expect(got.Status.ReadyReplicas).To(BeEquivalentTo(0))
		g.Expect(got.Status.UpdateRevision).NotTo(BeEmpty())
		g.Expect(got.Status.CurrentRevision).To(Equal(got.Status.UpdateRevision))
		g.Expect(got.Status.LabelSelector).To(Equal("app=web"))
		g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, meta.ReconcilingCondition)).To(BeTrue())
	}, timeout).Should(Succeed())
}

// The scale subresource is what kubectl scale and the HPA use.
func TestCloneSetScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 1)
	g.Expect(env.client.Create(context.Background(), cs)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(listPods(g, ns)).To(HaveLen(1)) }, timeout).Should(Succeed())

	scale := &autoscalingv1.Scale{}
	// The controller's status writes move the resourceVersion: retry the
	// read-modify-write as kubectl scale and the HPA do.
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.SubResource("scale").Get(context.Background(), cs, scale)).To(Succeed())
		scale.Spec.Replicas = 4
		g.Expect(env.client.SubResource("scale").Update(context.Background(), cs, client.WithSubResourceBody(scale))).To(Succeed())
	}, timeout).Should(Succeed())

	g.Eventually(func(g Gomega) { g.Expect(listPods(g, ns)).To(HaveLen(4)) }, timeout).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.SubResource("scale").Get(context.Background(), cs, scale)).To(Succeed())
		g.Expect(scale.Status.Replicas).To(BeEquivalentTo(4))
		g.Expect(scale.Status.Selector).To(Equal("app=web"))
	}, timeout).Should(Succeed())
}

// A template reverted to an earlier one reuses that ControllerRevision.
func TestCloneSetRevertReusesRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 0)
	g.Expect(env.client.Create(context.Background(), cs)).To(Succeed())
	var first string
	g.Eventually(func(g Gomega) {
		first = getCloneSet(g, ns, "web").Status.UpdateRevision
		g.Expect(first).NotTo(BeEmpty())
	}, timeout).Should(Succeed())

	setImage := func(image string) string {
		var rev string
		g.Eventually(func(g Gomega) {
			got := getCloneSet(g, ns, "web")
			got.Spec.Template.Spec.Containers[0].Image = image
			g.Expect(env.client.Update(context.Background(), got)).To(Succeed())
		}, timeout).Should(Succeed())
		g.Eventually(func(g Gomega) {
			got := getCloneSet(g, ns, "web")
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			rev = got.Status.UpdateRevision
		}, timeout).Should(Succeed())
		return rev
	}
	second := setImage("example.com/app:v2")
	g.Expect(second).NotTo(Equal(first))
	back := setImage("example.com/app:v1")
	g.Expect(back).To(Equal(first))

	var revs appsv1.ControllerRevisionList
	g.Expect(env.client.List(context.Background(), &revs, client.InNamespace(ns))).To(Succeed())
	g.Expect(revs.Items).To(HaveLen(2))
	numbers := map[string]int64{}
	for _, r := range revs.Items {
		numbers[r.Name] = r.Revision
	}
	g.Expect(numbers[first]).To(BeNumerically(">", numbers[second]), "the reused revision is renumbered as newest")
}

// podsToDelete removes the named Pod and a replacement keeps replicas.
func TestCloneSetPodsToDeleteIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 2)
	g.Expect(env.client.Create(context.Background(), cs)).To(Succeed())
	var victim string
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns)
		g.Expect(pods).To(HaveLen(2))
		victim = pods[0].Name
	}, timeout).Should(Succeed())

	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		got.Spec.ScaleStrategy.PodsToDelete = []string{victim}
		g.Expect(env.client.Update(context.Background(), got)).To(Succeed())
	}, timeout).Should(Succeed())

	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns)
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			g.Expect(p.Name).NotTo(Equal(victim))
		}
	}, timeout).Should(Succeed())
}

// A selector that does not select the template's Pods is a spec error a
// schema cannot see: the CloneSet stalls with a condition naming the fields.
func TestCloneSetSelectorMismatchStalls(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 2)
	cs.Spec.Template.Labels = map[string]string{"app": "other"}
	g.Expect(env.client.Create(context.Background(), cs)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		stalled := apimeta.FindStatusCondition(got.Status.Conditions, meta.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Message).To(ContainSubstring("spec.selector"))
		g.Expect(stalled.Message).To(ContainSubstring("spec.template.metadata.labels"))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(listPods(g, ns)).To(BeEmpty()) }, 2*time.Second).Should(Succeed())
}

func conditionStatus(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// The controller's status writes come back as watch events; a status-only
// change must not bring a reconcile, or every round would cost a second one
// that finds nothing to do (bench-scale counted about 15% more). What does
// bring one is a change to the spec, labels or annotations, and the Pods'
// own events. A status scribbled over by hand shows it: it stays until
// the CloneSet's next event, which puts the true one back.
func TestCloneSetStatusOnlyChangesBringNoReconcile(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(env.client.Create(context.Background(), newCloneSet(ns, "web", 2))).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, p := range listPods(g, ns) {
			g.Expect(conditionStatus(&p, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionTrue))
		}
		got := getCloneSet(g, ns, "web")
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Replicas).To(BeEquivalentTo(2))
		g.Expect(got.Status.UpdatedReplicas).To(BeEquivalentTo(2))
	}, timeout).Should(Succeed())
	// The round the last Pod event brought may still be writing.
	time.Sleep(500 * time.Millisecond)

	cs := getCloneSet(g, ns, "web")
	g.Expect(env.client.Status().Patch(context.Background(), cs,
		client.RawPatch(types.MergePatchType, []byte(`{"status":{"replicas":99}}`)))).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getCloneSet(g, ns, "web").Status.Replicas).To(BeEquivalentTo(99))
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed())

	g.Expect(env.client.Patch(context.Background(), cs,
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/touched":"yes"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getCloneSet(g, ns, "web").Status.Replicas).To(BeEquivalentTo(2))
	}, timeout).Should(Succeed())
}

// A round writes at most 20 Pods (maxPodsWrittenPerRound): the rest wait
// for the next round, which the writes' own watch events bring, so that a
// large CloneSet at maxUnavailable 100% brings its first Pods back while
// the others still move. 25 Pods to update take two rounds, and each round
// tells its Pods in one Event.
func TestCloneSetRoundWritesAtMostTwentyPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 25)
	cs.Spec.UpdateStrategy.MaxUnavailable = intOrStr("100%")
	g.Expect(env.client.Create(ctx, cs)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		g.Expect(got.Status.Replicas).To(BeEquivalentTo(25))
		g.Expect(got.Status.UpdatedReplicas).To(BeEquivalentTo(25))
	}, timeout).Should(Succeed())

	g.Expect(env.client.Patch(ctx, getCloneSet(g, ns, "web"), client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"example.com/app:v2"}]}}}}`)))).To(Succeed())
	podsInNote := regexp.MustCompile(`^updating (?:(\d+) pods|pod \S+) `)
	var rounds []int
	g.Eventually(func(g Gomega) {
		rounds = nil
		total := 0
		for _, note := range cloneSetEventNotes(g, ns, "web", stepwisev1.EventSuccessfulUpdatePodInPlace) {
			m := podsInNote.FindStringSubmatch(note)
			g.Expect(m).NotTo(BeNil(), "note %q", note)
			n := 1
			if m[1] != "" {
				n, _ = strconv.Atoi(m[1])
			}
			rounds = append(rounds, n)
			total += n
		}
		g.Expect(total).To(Equal(25), "Pods told updating, by round: %v", rounds)
	}, timeout).Should(Succeed())
	for _, n := range rounds {
		if n > 20 {
			t.Errorf("a round updated %d Pods, want at most 20 (rounds: %v)", n, rounds)
		}
	}
}
