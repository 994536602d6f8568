package realnode

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
)

// keyConditions are the Pod conditions the controllers read.
var keyConditions = []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, stepwisev1.InPlaceUpdateReady}

// podView is what the controllers read of a Pod's status, with container
// and image IDs replaced by their order of appearance (#1, #2) so that two
// runs compare.
type podView struct {
	Phase      corev1.PodPhase
	Conditions string // Ready=True ContainersReady=True InPlaceUpdateReady=False
	Containers string // app{...} sidecar{...}
	ObservedOK bool   // status.observedGeneration caught up with metadata.generation
}

func (v podView) String() string {
	return fmt.Sprintf("%s %s | %s", v.Phase, v.Conditions, v.Containers)
}

// viewer numbers IDs in order of appearance, per container.
type viewer struct{ ids map[string]map[string]int }

func (vw *viewer) ordinal(kind, id string) string {
	if id == "" {
		return "-"
	}
	if vw.ids == nil {
		vw.ids = map[string]map[string]int{}
	}
	m := vw.ids[kind]
	if m == nil {
		m = map[string]int{}
		vw.ids[kind] = m
	}
	if _, ok := m[id]; !ok {
		m[id] = len(m) + 1
	}
	return fmt.Sprintf("#%d", m[id])
}

func (vw *viewer) view(pod *corev1.Pod) podView {
	v := podView{Phase: pod.Status.Phase}
	var conds []string
	for _, t := range keyConditions {
		s := "-"
		for _, c := range pod.Status.Conditions {
			if c.Type == t {
				s = string(c.Status)
			}
		}
		conds = append(conds, fmt.Sprintf("%s=%s", t, s))
	}
	v.Conditions = strings.Join(conds, " ")
	var cs []string
	statuses := append([]corev1.ContainerStatus(nil), pod.Status.ContainerStatuses...)
	sort.Slice(statuses, func(i, j int) bool { return statuses[i].Name < statuses[j].Name })
	for _, s := range statuses {
		state, last := "waiting", "-"
		switch {
		case s.State.Running != nil:
			state = "running"
		case s.State.Terminated != nil:
			state = "terminated"
		}
		if s.LastTerminationState.Terminated != nil {
			last = "terminated"
		}
		image := s.Image[strings.LastIndex(s.Image, ":")+1:]
		cs = append(cs, fmt.Sprintf("%s{%s %s ready=%t started=%t restarts=%d cid=%s iid=%s last=%s}",
			s.Name, image, state, s.Ready, s.Started != nil && *s.Started, s.RestartCount,
			vw.ordinal(s.Name+"/cid", s.ContainerID), vw.ordinal(s.Name+"/iid", s.ImageID), last))
	}
	v.Containers = strings.Join(cs, " ")
	return v
}

// transitions records, from a watch, every distinct view of the one Pod of
// a namespace.
type transitions struct {
	mu     sync.Mutex
	vw     viewer
	views  []podView
	cancel context.CancelFunc
	done   chan struct{}
}

func recordTransitions(t *testing.T, cs kubernetes.Interface, ns string) *transitions {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	tr := &transitions{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			tr.mu.Lock()
			v := tr.vw.view(pod)
			if n := len(tr.views); n == 0 || tr.views[n-1].String() != v.String() {
				tr.views = append(tr.views, v)
			}
			tr.mu.Unlock()
		}
	}()
	t.Cleanup(tr.stop)
	return tr
}

func (tr *transitions) stop() {
	tr.cancel()
	<-tr.done
}

func (tr *transitions) lines() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, v := range tr.views {
		out = append(out, v.String())
	}
	return out
}

// script is the scripted in-place update both runs play: one Pod of the
// demo app (with its sidecar) on v1, then the image changed to v2.
func script(t *testing.T, b *bed, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	b.create(t, demoCloneSet(ns, "web", "v1", 1, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))
	b.waitSettled(t, ns, "web", 1, 2*time.Minute)
	tr := recordTransitions(t, cs, ns)
	// The watch starts with the current state.
	gomega.NewWithT(t).Eventually(func() int { return len(tr.lines()) }, 10*time.Second, 50*time.Millisecond).Should(gomega.Equal(1))
	b.mutate(t, ns, "web", func(c *stepwisev1.CloneSet) { c.Spec.Template.Spec.Containers[0].Image = DemoImage + ":v2" })
	b.waitSettled(t, ns, "web", 1, 2*time.Minute)
	// Let late status writes arrive.
	time.Sleep(3 * time.Second)
	tr.stop()
	return tr.lines()
}

// milestones are the moments of an in-place update that the controllers
// act on, in the order they first happened in a run.
func milestones(lines []string) []string {
	checks := []struct {
		name string
		when func(string) bool
	}{
		{"gate False", func(l string) bool { return strings.Contains(l, "InPlaceUpdateReady=False") }},
		{"Pod not Ready", func(l string) bool { return strings.Contains(l, " Ready=False") }},
		{"app not ready", func(l string) bool { return appField(l, "ready=false") }},
		{"app restarted on v2", func(l string) bool { return strings.Contains(l, "app{v2") && appField(l, "restarts=1") }},
		{"new app ready", func(l string) bool { return strings.Contains(l, "app{v2") && appField(l, "ready=true") }},
		{"gate True again", func(l string) bool {
			return strings.Contains(l, "app{v2") && strings.Contains(l, "InPlaceUpdateReady=True")
		}},
		{"Pod Ready again", func(l string) bool { return strings.Contains(l, "app{v2") && strings.Contains(l, " Ready=True") }},
	}
	type hit struct {
		name string
		at   int
	}
	var hits []hit
	for _, c := range checks {
		for i, l := range lines {
			if i > 0 && c.when(l) {
				hits = append(hits, hit{c.name, i})
				break
			}
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].at < hits[j].at })
	var out []string
	for _, h := range hits {
		out = append(out, h.name)
	}
	return out
}

// appField reports whether the app container's part of a line has field.
func appField(line, field string) bool {
	i := strings.Index(line, "app{")
	if i < 0 {
		return false
	}
	j := strings.Index(line[i:], "}")
	return strings.Contains(line[i:i+j], field)
}

// testSimulatorFaithful plays the same in-place update on the real node
// and on kwok with test/kwok/stages.yaml (the manager outside the cluster,
// under the shipped RBAC, as test/e2e runs it), and compares what the
// controllers read of the Pod: the first and last states must be equal and
// the milestones must come in the same order. The full sequences are
// logged; docs/real-node.md records the differences that remain.
func testSimulatorFaithful(t *testing.T, b *bed) {
	real := script(t, b, b.Clientset, b.namespace(t, "faithful"))

	cluster := kwokcluster.StartForTest(t, kwokcluster.Options{})
	kc, err := harness.NewClient(cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	managerCfg, err := shippedrbac.ManagerConfig(t.Context(), cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	m, err := harness.StartManager(context.Background(), managerCfg, manager.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	kb := &bed{Node: &Node{Cluster: cluster, Clientset: cluster.Clientset(), RESTConfig: cluster.RESTConfig}, client: kc}
	simulated := script(t, kb, cluster.Clientset(), kb.namespace(t, "faithful"))

	t.Logf("real kubelet, %d states:\n  %s", len(real), strings.Join(real, "\n  "))
	t.Logf("kwok Stages, %d states:\n  %s", len(simulated), strings.Join(simulated, "\n  "))
	g := gomega.NewWithT(t)
	g.Expect(simulated[0]).To(gomega.Equal(real[0]), "the settled Pod before the update")
	g.Expect(simulated[len(simulated)-1]).To(gomega.Equal(real[len(real)-1]), "the settled Pod after the update")
	g.Expect(milestones(simulated)).To(gomega.Equal(milestones(real)), "the order of what the controllers act on")
	t.Logf("milestones: %s", strings.Join(milestones(real), " -> "))
	// The kubelet kills and starts the container within one sync and
	// reports the new one; kwok shows the old one terminated in between
	// (for its restart-delay annotation). Everything else should match.
	if a, b := withoutTerminated(simulated), withoutTerminated(real); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Logf("beyond the terminated state, the sequences differ (timing; see docs/real-node.md)")
	} else {
		t.Logf("the sequences match but for kwok's terminated state")
	}
}

// withoutTerminated drops the states in which a container is terminated.
func withoutTerminated(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, " terminated ready=") {
			out = append(out, l)
		}
	}
	return out
}
