package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
	"github.com/stepwise-dev/stepwise/test/argocdhealth"
	"github.com/stepwise-dev/stepwise/test/gitopssync"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

const (
	gitopsReplicas = 5
	// gitopsSyncInterval is the syncer's drift correction period: Flux's
	// interval, Argo CD's self-heal, made short so that a test sees dozens
	// of re-applies during one rollout.
	gitopsSyncInterval = time.Second
	gitopsCloneSetFile = "apps/web/cloneset.yaml"
	gitopsRolloutFile  = "apps/web/rollout.yaml"
	// gitopsStepPause is the timed pause of the first step.
	gitopsStepPause = 3 * time.Second
	// gitopsPartitionInGit is the partition the CloneSet manifest keeps, as
	// an OpenKruise manifest ported to Stepwise usually does.
	gitopsPartitionInGit = "0"
)

// The health checks shipped for Argo CD, run against live objects.
const (
	gitopsRolloutLua  = "../../config/argocd/rollout-health.lua"
	gitopsCloneSetLua = "../../config/argocd/cloneset-health.lua"
)

// gitopsPlan names a step plan of the Rollout manifest.
type gitopsPlan int

const (
	// gitopsTimedPlan: 60% with a timed pause, 20%, 0; each analysed.
	gitopsTimedPlan gitopsPlan = iota
	// gitopsPromotePlan: 60% waiting for a promote request, then 0; each analysed.
	gitopsPromotePlan
)

// gitopsManifests is what the repository holds: a CloneSet and a Rollout,
// described by the few things the stories change.
type gitopsManifests struct {
	ns      string
	promURL string
	// version is the app image tag.
	version string
	// partition is the CloneSet's spec.updateStrategy.partition in git
	// ("0", "100%"); "" leaves the field out. The Rollout ignores it.
	partition string
	// paused is the Rollout's spec.paused, the git way to hold releases.
	paused bool
	plan   gitopsPlan
}

// files renders the manifests as a person would commit them. Maps, not the
// Go types, so that exactly the fields written here are in git: a typed
// CloneSet would carry an empty status and a null creationTimestamp.
func (m gitopsManifests) files() (map[string]string, error) {
	strategy := map[string]any{"type": string(stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType), "maxUnavailable": "100%"}
	if m.partition != "" {
		// An integer stays an integer in YAML (partition: 0), a percent a string.
		strategy["partition"] = intstr.Parse(m.partition)
	}
	cloneSet := map[string]any{
		"apiVersion": stepwisev1.GroupVersion.String(),
		"kind":       "CloneSet",
		"metadata":   map[string]any{"name": "web", "namespace": m.ns},
		"spec": map[string]any{
			"replicas": gitopsReplicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{
					"labels": map[string]any{"app": "web"},
					// Restart at once: the stories are about git, not restart delays.
					"annotations": map[string]any{kwokcluster.AnnotationRestartDelay: "0"},
				},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": webImage(m.version)}}},
			},
			"updateStrategy": strategy,
		},
	}
	var steps []stepwisev1.RolloutStep
	switch m.plan {
	case gitopsTimedPlan:
		steps = []stepwisev1.RolloutStep{
			{Partition: intstr.FromString("60%"), Pause: &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: gitopsStepPause}}},
			{Partition: intstr.FromString("20%")},
			{Partition: intstr.FromInt32(0)},
		}
	case gitopsPromotePlan:
		steps = []stepwisev1.RolloutStep{
			{Partition: intstr.FromString("60%"), Pause: &stepwisev1.StepPause{}},
			{Partition: intstr.FromInt32(0)},
		}
	}
	rollout := map[string]any{
		"apiVersion": stepwisev1.GroupVersion.String(),
		"kind":       "Rollout",
		"metadata":   map[string]any{"name": "web", "namespace": m.ns},
		"spec": stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"},
			Steps:       steps,
			Analysis:    errorRateAnalysis(m.promURL),
			Paused:      m.paused,
		},
	}
	out := map[string]string{}
	for path, obj := range map[string]any{gitopsCloneSetFile: cloneSet, gitopsRolloutFile: rollout} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", path, err)
		}
		out[path] = string(b)
	}
	return out, nil
}

// gitopsApp is one app delivered by one GitOps tool: a namespace, the git
// repository that describes it, the syncer that applies it, and a recorder
// of every state its Rollout, CloneSet and Pods went through.
type gitopsApp struct {
	e      *rolloutEnv
	mode   gitopssync.Mode
	ns     string
	repo   *gitopssync.Repo
	syncer *gitopssync.Syncer
	health *gitopsHealth
	// git is what HEAD holds.
	git gitopsManifests
}

// gitopsNewApp makes the namespace, the repository (empty) and the
// recorder; the first commit starts the syncer.
func gitopsNewApp(t *testing.T, e *rolloutEnv, mode gitopssync.Mode) *gitopsApp {
	t.Helper()
	prefix := "flux"
	if mode == gitopssync.ClientSideApply {
		prefix = "argocd"
	}
	ns := e.namespace(t, prefix)
	repo, err := gitopssync.NewRepo()
	if err != nil {
		t.Fatal(err)
	}
	a := &gitopsApp{
		e: e, mode: mode, ns: ns, repo: repo,
		git: gitopsManifests{ns: ns, promURL: e.prom.URL(), version: "1.0.0", partition: gitopsPartitionInGit, plan: gitopsTimedPlan},
	}
	a.health = gitopsRecord(t, e, ns)
	return a
}

// manager is the field manager the app's GitOps tool writes as.
func (a *gitopsApp) manager() string {
	if a.mode == gitopssync.ClientSideApply {
		return gitopssync.ArgoCDFieldManager
	}
	return gitopssync.FluxFieldManager
}

// commit changes the manifests, commits them and has the syncer apply the
// commit now, as a webhook from the git host would.
func (a *gitopsApp) commit(t *testing.T, message string, change func(*gitopsManifests)) plumbing.Hash {
	t.Helper()
	change(&a.git)
	files, err := a.git.files()
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.repo.Commit(message, files)
	if err != nil {
		t.Fatal(err)
	}
	a.sync(t)
	return h
}

// revert runs `git revert h` and syncs; change tells the model what the
// revert put back, and the model is checked against the repository.
func (a *gitopsApp) revert(t *testing.T, h plumbing.Hash, change func(*gitopsManifests)) plumbing.Hash {
	t.Helper()
	r, err := a.repo.Revert(h)
	if err != nil {
		t.Fatal(err)
	}
	change(&a.git)
	want, err := a.git.files()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := a.repo.Checkout("apps")
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range want {
		if string(snap.Files[path]) != content {
			t.Fatalf("after reverting %s, %s holds\n%s\nbut the test expects\n%s", h, path, snap.Files[path], content)
		}
	}
	a.sync(t)
	return r
}

// sync applies HEAD now; the first call starts the syncer, which then
// re-applies HEAD every gitopsSyncInterval until the test ends.
func (a *gitopsApp) sync(t *testing.T) {
	t.Helper()
	if a.syncer == nil {
		s, err := gitopssync.Start(t.Context(), gitopssync.Options{
			Repo: a.repo, Path: "apps", Client: a.e.client, Mode: a.mode, Interval: gitopsSyncInterval, Logf: t.Logf,
		})
		if err != nil {
			t.Fatalf("starting the syncer: %v", err)
		}
		a.syncer = s
		return
	}
	if _, err := a.syncer.Sync(t.Context()); err != nil {
		t.Fatalf("syncing: %v", err)
	}
}

func (a *gitopsApp) rollout(g Gomega) *stepwisev1.Rollout {
	ro := &stepwisev1.Rollout{}
	g.Expect(a.e.client.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: "web"}, ro)).To(Succeed())
	return ro
}

// cloneSet reads the CloneSet as it is stored: unstructured, so that what
// the stories read of governance (status.rollout) is the API server's JSON.
func (a *gitopsApp) cloneSet(g Gomega) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(stepwisev1.GroupVersion.WithKind("CloneSet"))
	g.Expect(a.e.client.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: "web"}, u)).To(Succeed())
	return u
}

// waitRollout waits until check passes; a failure prints the last status.
func (a *gitopsApp) waitRollout(t *testing.T, what string, check func(g Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	t.Helper()
	var last *stepwisev1.Rollout
	NewWithT(t).Eventually(func(g Gomega) {
		last = a.rollout(g)
		check(g, last)
	}, rolloutTimeout, rolloutPoll).Should(Succeed(), func() string { return what + "\n" + describeRollout(last) })
	return last
}

// updateRevision waits until the CloneSet saw its latest spec and returns
// its update revision.
func (a *gitopsApp) updateRevision(t *testing.T) string {
	t.Helper()
	var rev string
	NewWithT(t).Eventually(func(g Gomega) {
		cs := a.cloneSet(g)
		g.Expect(gitopsObserved(cs)).To(BeTrue())
		rev = gitopsString(cs, "status", "updateRevision")
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	return rev
}

// waitHealthyAt waits for a finished rollout: Healthy on revision, Ready,
// the CloneSet letting every Pod run revision, every Pod on it.
func (a *gitopsApp) waitHealthyAt(t *testing.T, revision string) *stepwisev1.Rollout {
	t.Helper()
	ro := a.waitRollout(t, "Healthy on "+revision, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(revision))
		g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, meta.ReadyCondition)).To(BeTrue())
		g.Expect(gitopsGovernor(a.cloneSet(g))).To(Equal(revision+"/0"), "status.rollout: revision acknowledged, every Pod may run it")
	})
	a.e.waitSettled(t, a.ns, "web", gitopsReplicas, gitopsReplicas, settleTimeout)
	a.waitPodsRun(t, "")
	return ro
}

// waitPodsRun waits until every Pod runs, ready, the image of its spec;
// with image set, that image. Restart counts are final then.
func (a *gitopsApp) waitPodsRun(t *testing.T, image string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		pods := a.e.pods(g, a.ns)
		g.Expect(pods).To(HaveLen(gitopsReplicas))
		for _, p := range pods {
			cs := containerStatus(&p, "app")
			g.Expect(cs).NotTo(BeNil(), "pod %s has a status for app", p.Name)
			g.Expect(cs.Image).To(Equal(imageOf(&p, "app")), "pod %s runs its spec's image", p.Name)
			if image != "" {
				g.Expect(cs.Image).To(Equal(image), "pod %s", p.Name)
			}
			g.Expect(podCondition(&p, corev1.PodReady)).To(Equal(corev1.ConditionTrue), "pod %s ready", p.Name)
		}
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
}

// restarts maps each Pod name to its app container's restart count: the
// kwok stages restart a container once per in-place image change.
func (a *gitopsApp) restarts(g Gomega) map[string]int32 {
	out := map[string]int32{}
	for _, p := range a.e.pods(g, a.ns) {
		cs := containerStatus(&p, "app")
		g.Expect(cs).NotTo(BeNil(), "pod %s has a status for app", p.Name)
		out[p.Name] = cs.RestartCount
	}
	return out
}

// expectRestarts asserts how many times each Pod restarted since before:
// the same Pods (none replaced), and as many restarts as want holds, in
// any order (which Pods are the canaries is the CloneSet's choice).
func (a *gitopsApp) expectRestarts(g Gomega, before map[string]int32, want ...int32) {
	after := a.restarts(g)
	g.Expect(slices.Sorted(maps.Keys(after))).To(Equal(slices.Sorted(maps.Keys(before))), "the same Pods, updated in place")
	var got []int32
	for name, n := range after {
		got = append(got, n-before[name])
	}
	slices.Sort(got)
	slices.Sort(want)
	g.Expect(got).To(Equal(want), "restarts per Pod: before %v, after %v", before, after)
}

// waitRates waits until Prometheus has both code series of every Pod: an
// analysis of Pods Prometheus has not seen twice would be inconclusive.
func (a *gitopsApp) waitRates(t *testing.T) {
	t.Helper()
	q := fmt.Sprintf(`count(rate(http_requests_total{namespace=%q}[10s]))`, a.ns)
	NewWithT(t).Eventually(func(g Gomega) {
		v, _, _, err := a.e.promAPI.Query(context.Background(), q, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		vec, ok := v.(model.Vector)
		g.Expect(ok).To(BeTrue(), "vector result, got %s", v.Type())
		g.Expect(vec).To(HaveLen(1))
		g.Expect(float64(vec[0].Value)).To(BeEquivalentTo(2 * gitopsReplicas))
	}, rolloutTimeout, 250*time.Millisecond).Should(Succeed())
}

// promote writes the promote-at request, as `kubectl stepwise promote` does.
func (a *gitopsApp) promote(t *testing.T) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stepwisev1.PromoteAtAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "web"}}
	if err := a.e.client.Patch(t.Context(), ro, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("promoting: %v", err)
	}
}

// events returns the notes of the Events about an object of kind with reason.
func (a *gitopsApp) events(g Gomega, kind, reason string) []string {
	var list eventsv1.EventList
	g.Expect(a.e.client.List(context.Background(), &list, client.InNamespace(a.ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == kind && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// runsSince returns the syncer's applies that started at or after t0.
func (a *gitopsApp) runsSince(t0 time.Time) []gitopssync.Run {
	var out []gitopssync.Run
	for _, r := range a.syncer.Runs() {
		if !r.Started.Before(t0) {
			out = append(out, r)
		}
	}
	return out
}

// expectNoSyncErrors fails on any apply that failed since t0: a syncer that
// silently stopped applying would make every other assertion hollow.
func (a *gitopsApp) expectNoSyncErrors(g Gomega, t0 time.Time) []gitopssync.Run {
	runs := a.runsSince(t0)
	for _, r := range runs {
		g.Expect(r.Err).NotTo(HaveOccurred(), "apply %s", r)
	}
	return runs
}

// reapplies splits the applies since t0 that re-applied the revision of the
// apply before them (drift correction) by whether they changed the CloneSet.
func (a *gitopsApp) reapplies(t0 time.Time) (unchanged, changed []gitopssync.Run) {
	all := a.syncer.Runs()
	for i := 1; i < len(all); i++ {
		r := all[i]
		if r.Started.Before(t0) || r.Revision != all[i-1].Revision {
			continue
		}
		if r.Actions["CloneSet/web"] == "unchanged" {
			unchanged = append(unchanged, r)
		} else {
			changed = append(changed, r)
		}
	}
	return unchanged, changed
}

// specChanges counts the changes of the CloneSet's spec since mark: what
// only a commit may cause, since nothing but the GitOps tool writes it.
func (h *gitopsHealth) specChanges(g Gomega, mark gitopsMark) int {
	n := 0
	samples := h.since(g, mark, "CloneSet")
	if prev := h.before(mark, "CloneSet"); prev != nil {
		samples = append([]gitopsSample{*prev}, samples...)
	}
	var last map[string]any
	for _, s := range samples {
		spec, _, _ := unstructured.NestedMap(s.obj.Object, "spec")
		if last != nil && !apiequality.Semantic.DeepEqual(last, spec) {
			n++
		}
		last = spec
	}
	return n
}

// expectSyncerChangedOnlyGit asserts what the syncer did since t0 and
// mark: no apply failed, re-applies ran and changed nothing, and the
// CloneSet's spec changed exactly commits times. The partition in git is
// the tool's and nobody else writes it, so a re-apply finds nothing to
// correct, with either tool.
func (a *gitopsApp) expectSyncerChangedOnlyGit(t *testing.T, g Gomega, t0 time.Time, mark gitopsMark, commits int) {
	t.Helper()
	a.expectNoSyncErrors(g, t0)
	unchanged, changed := a.reapplies(t0)
	g.Expect(len(unchanged)+len(changed)).To(BeNumerically(">=", 3), "the syncer kept re-applying")
	g.Expect(a.health.specChanges(g, mark)).To(Equal(commits), "spec changes of the CloneSet")
	g.Expect(changed).To(BeEmpty(), "a re-apply of the same commit changed the CloneSet")
	t.Logf("%d re-applies of an applied commit, none changed the CloneSet", len(unchanged))
}

// gitopsHealth records every version of a namespace's Rollouts and
// CloneSets, from watches, with what kstatus (Flux) and the shipped Lua
// (Argo CD) say of each: a health check polls, and could land on any of
// them. It records the Pods' app images too.
type gitopsHealth struct {
	rolloutLua, cloneSetLua string

	mu      sync.Mutex
	samples []gitopsSample
	pods    []gitopsPodSample
	broken  bool
}

// gitopsMark is a point in the record.
type gitopsMark struct{ objs, pods int }

// gitopsSample is one version of an object and its health.
type gitopsSample struct {
	at  time.Time
	obj *unstructured.Unstructured
	// kstatus is status.Compute's verdict, lua the health script's.
	kstatus, kstatusMessage string
	lua, luaMessage         string
	err                     error
}

// gitopsPodSample is the app container of one version of a Pod.
type gitopsPodSample struct {
	name, image string
}

func (s gitopsSample) kind() string { return s.obj.GetKind() }

// verdict is "<kstatus>/<lua>", as the stories compare them.
func (s gitopsSample) verdict() string { return s.kstatus + "/" + s.lua }

func (s gitopsSample) String() string {
	st, _, _ := unstructured.NestedMap(s.obj.Object, "status")
	delete(st, "measurements")
	delete(st, "analysis")
	b, _ := json.Marshal(st)
	return fmt.Sprintf("%s %s rv=%s gen=%d partition=%q owners=%v: kstatus %s (%s), lua %s (%s); status %s",
		s.at.Format("15:04:05.000"), s.kind(), s.obj.GetResourceVersion(), s.obj.GetGeneration(), gitopsPartition(s.obj), gitopsPartitionOwners(s.obj),
		s.kstatus, s.kstatusMessage, s.lua, s.luaMessage, b)
}

// gitopsRecord starts the watches. The API server sends every
// resourceVersion on a watch, so no state is missed however short.
func gitopsRecord(t *testing.T, e *rolloutEnv, ns string) *gitopsHealth {
	t.Helper()
	h := &gitopsHealth{}
	for path, dst := range map[string]*string{gitopsRolloutLua: &h.rolloutLua, gitopsCloneSetLua: &h.cloneSetLua} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading the Argo CD health check: %v", err)
		}
		*dst = string(b)
	}
	ctx := t.Context()
	follow := func(list client.ObjectList, seen func(obj any)) {
		w, err := e.watcher.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error || ev.Type == watch.Deleted {
					continue
				}
				seen(ev.Object)
			}
			if ctx.Err() == nil {
				h.mu.Lock()
				h.broken = true
				h.mu.Unlock()
			}
		}()
	}
	for _, kind := range []string{"RolloutList", "CloneSetList"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(stepwisev1.GroupVersion.WithKind(kind))
		follow(list, func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				h.observe(u)
			}
		})
	}
	follow(&corev1.PodList{}, func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
			h.mu.Lock()
			h.pods = append(h.pods, gitopsPodSample{name: p.Name, image: imageOf(p, "app")})
			h.mu.Unlock()
		}
	})
	return h
}

func (h *gitopsHealth) observe(u *unstructured.Unstructured) {
	s := gitopsSample{at: time.Now(), obj: u}
	res, err := kstatus.Compute(u)
	if err != nil {
		s.err = fmt.Errorf("kstatus: %w", err)
	} else {
		s.kstatus, s.kstatusMessage = string(res.Status), res.Message
	}
	script := h.rolloutLua
	if u.GetKind() == "CloneSet" {
		script = h.cloneSetLua
	}
	s.lua, s.luaMessage, err = argocdhealth.Evaluate(script, u.Object)
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("argo cd health script: %w", err)
	}
	h.mu.Lock()
	h.samples = append(h.samples, s)
	h.mu.Unlock()
}

// mark is a point in the record; since returns what came after it.
func (h *gitopsHealth) mark() gitopsMark {
	h.mu.Lock()
	defer h.mu.Unlock()
	return gitopsMark{objs: len(h.samples), pods: len(h.pods)}
}

func (h *gitopsHealth) since(g Gomega, mark gitopsMark, kind string) []gitopsSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	g.Expect(h.broken).To(BeFalse(), "the watches ran for the whole story")
	var out []gitopsSample
	for _, s := range h.samples[mark.objs:] {
		if kind == "" || s.kind() == kind {
			out = append(out, s)
		}
	}
	return out
}

// before returns the last sample of kind before mark: the state a story
// started from; nil when there is none.
func (h *gitopsHealth) before(mark gitopsMark, kind string) *gitopsSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := mark.objs - 1; i >= 0; i-- {
		if h.samples[i].kind() == kind {
			s := h.samples[i]
			return &s
		}
	}
	return nil
}

// images is, for each Pod, the app images its spec went through since
// mark, starting with the one it had at mark, without consecutive
// repeats: one entry more per in-place update the CloneSet ordered.
func (h *gitopsHealth) images(g Gomega, mark gitopsMark) map[string][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	g.Expect(h.broken).To(BeFalse(), "the watches ran for the whole story")
	out := map[string][]string{}
	add := func(p gitopsPodSample) {
		if seq := out[p.name]; len(seq) == 0 || seq[len(seq)-1] != p.image {
			out[p.name] = append(seq, p.image)
		}
	}
	for _, p := range h.pods[:mark.pods] {
		// Only the last image before mark counts.
		out[p.name] = []string{p.image}
	}
	for _, p := range h.pods[mark.pods:] {
		add(p)
	}
	return out
}

// expectImages asserts that the Pods' images since mark were exactly want
// (a list of image sequences, in any order: which Pods are the canaries is
// the CloneSet's choice). One Pod per sequence.
func (h *gitopsHealth) expectImages(g Gomega, mark gitopsMark, want ...[]string) {
	var got, wanted []string
	for _, seq := range h.images(g, mark) {
		got = append(got, strings.Join(seq, " → "))
	}
	for _, seq := range want {
		wanted = append(wanted, strings.Join(seq, " → "))
	}
	g.Expect(got).To(ConsistOf(wanted), "the app images each Pod went through")
}

// repeat is n copies of seq.
func repeat(n int, seq ...string) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = seq
	}
	return out
}

// verdicts is the sequence of "<kstatus>/<lua>" of kind's samples since
// mark, without consecutive repeats and without objects that have no
// status yet.
func (h *gitopsHealth) verdicts(g Gomega, mark gitopsMark, kind string) []string {
	var out []string
	for _, s := range h.since(g, mark, kind) {
		if !gitopsHasStatus(s.obj) {
			continue
		}
		if v := s.verdict(); len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// timeline is, for kind's samples since mark, "<state>: <kstatus>/<lua>"
// without consecutive repeats: the phase and reason of a Rollout, the
// Ready reason and applied partition of a CloneSet ("gen" while its spec
// is not yet observed).
func (h *gitopsHealth) timeline(g Gomega, mark gitopsMark, kind string) []string {
	var out []string
	for _, s := range h.since(g, mark, kind) {
		if !gitopsHasStatus(s.obj) {
			continue
		}
		state := "gen"
		switch {
		case !gitopsObserved(s.obj):
		case kind == "Rollout":
			state = gitopsString(s.obj, "status", "phase") + "/" + gitopsString(s.obj, "status", "reason") + " grant " + gitopsGrant(s.obj)
		default:
			_, reason, _ := gitopsCondition(s.obj, meta.ReadyCondition)
			state = reason + " applies " + gitopsAppliedPartition(s.obj)
		}
		if v := state + ": " + s.verdict(); len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// partitions is the partition the CloneSet applied over time since mark,
// without consecutive repeats (see gitopsAppliedPartition).
func (h *gitopsHealth) partitions(g Gomega, mark gitopsMark) []string {
	var out []string
	for _, s := range h.since(g, mark, "CloneSet") {
		if p := gitopsAppliedPartition(s.obj); len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// grants is the Rollout's partitionGrant over time since mark, starting
// with the one it had at mark, as "<revision>/<partition>", without
// consecutive repeats.
func (h *gitopsHealth) grants(g Gomega, mark gitopsMark) []string {
	samples := h.since(g, mark, "Rollout")
	if prev := h.before(mark, "Rollout"); prev != nil {
		samples = append([]gitopsSample{*prev}, samples...)
	}
	var out []string
	for _, s := range samples {
		if p := gitopsGrant(s.obj); len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// Verdicts as "<kstatus>/<Argo CD health>".
const (
	gitopsCurrent    = "Current/Healthy"
	gitopsInProgress = "InProgress/Progressing"
	gitopsSuspended  = "InProgress/Suspended"
	gitopsFailed     = "Failed/Degraded"
)

// expectGoverned checks every version since mark against what a Rollout
// governing its CloneSet promises, whatever git holds and however often it
// is applied:
//   - every health verdict tells the truth (expectTruthful);
//   - a CloneSet whose update revision the Rollout has not acknowledged is
//     never Current for kstatus nor Healthy for Argo CD;
//   - the Rollout's field manager owns no field of the CloneSet's spec, and
//     the partition, whenever git has one, belongs to the tool alone;
//   - no Rollout reports PartitionConflict: there is nothing to fight over;
//   - no moment where every object is Current (or every one Healthy) while
//     the Rollout has not taken up the CloneSet's template.
func (a *gitopsApp) expectGoverned(g Gomega, mark gitopsMark) {
	h := a.health
	h.expectTruthful(g, mark)
	var premature, owned, conflicts []string
	for _, s := range h.since(g, mark, "") {
		switch s.kind() {
		case "CloneSet":
			if gitopsHasStatus(s.obj) && !gitopsAcknowledged(s.obj) && (s.kstatus == "Current" || s.lua == "Healthy") {
				premature = append(premature, s.String())
			}
			if slices.Contains(gitopsOwners(s.obj, "spec"), workload.FieldManager) {
				owned = append(owned, s.String())
			}
			if gitopsPartition(s.obj) != "" && !slices.Equal(gitopsPartitionOwners(s.obj), []string{a.manager()}) {
				owned = append(owned, s.String())
			}
		case "Rollout":
			if c, _, msg := gitopsCondition(s.obj, stepwisev1.PartitionConflictCondition); c != "" {
				conflicts = append(conflicts, c+": "+msg)
			}
		}
	}
	g.Expect(premature).To(BeEmpty(), "a CloneSet Current or Healthy with an update revision its Rollout has not acknowledged")
	g.Expect(owned).To(BeEmpty(), "spec fields of the CloneSet owned by %s, or a partition in git not owned by %s alone", workload.FieldManager, a.manager())
	g.Expect(conflicts).To(BeEmpty(), "%s on the Rollout", stepwisev1.PartitionConflictCondition)
	g.Expect(a.events(g, "Rollout", stepwisev1.EventPartitionConflict)).To(BeEmpty(), "%s Events", stepwisev1.EventPartitionConflict)
	g.Expect(h.premature(g, mark)).To(BeEmpty(), "spans where every object was Current, or every one Healthy, before the Rollout took up the CloneSet's template")
}

// expectTruthful checks every sample since mark against what the object
// reports of itself:
//   - a Rollout: spec not yet observed → InProgress/Progressing; Healthy and
//     Ready → Current/Healthy; Progressing → InProgress/Progressing; Paused →
//     InProgress/Suspended; Aborted → Failed/Degraded;
//   - a CloneSet: spec not yet observed, an update revision its Rollout has
//     not acknowledged, or Pods not where the applied partition puts them →
//     InProgress/Progressing;
//   - both: kstatus and Argo CD agree (Current with Healthy, InProgress with
//     Progressing or Suspended, Failed with Degraded), and both evaluate
//     without error.
//
// Objects without a status (created, not yet reconciled) are left out:
// kstatus calls them Current by its generic rule; see gitopsNoStatus.
func (h *gitopsHealth) expectTruthful(g Gomega, mark gitopsMark) {
	var bad []string
	for _, s := range h.since(g, mark, "") {
		if s.err != nil {
			bad = append(bad, fmt.Sprintf("%v: %s", s.err, s))
			continue
		}
		if !gitopsHasStatus(s.obj) {
			continue
		}
		agree := map[string][]string{"Current": {"Healthy"}, "InProgress": {"Progressing", "Suspended"}, "Failed": {"Degraded"}}
		if !slices.Contains(agree[s.kstatus], s.lua) {
			bad = append(bad, "kstatus and Argo CD disagree: "+s.String())
			continue
		}
		want := gitopsWantCloneSet(s.obj)
		if s.kind() == "Rollout" {
			want = gitopsWantRollout(s.obj)
		}
		if want != "" && s.verdict() != want {
			bad = append(bad, fmt.Sprintf("want %s: %s", want, s))
		}
	}
	g.Expect(bad).To(BeEmpty(), "health verdicts that do not tell the truth")
}

func gitopsHasStatus(u *unstructured.Unstructured) bool {
	_, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return found
}

func gitopsObserved(u *unstructured.Unstructured) bool {
	obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return obs == u.GetGeneration()
}

func gitopsString(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func gitopsInt(u *unstructured.Unstructured, fields ...string) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, fields...)
	return n
}

// gitopsIntOrString reads an int-or-string field as its text; "" when unset.
func gitopsIntOrString(u *unstructured.Unstructured, fields ...string) string {
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if !found || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// gitopsCondition returns a condition's status, reason and message.
func gitopsCondition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return status, reason, message
		}
	}
	return "", "", ""
}

// logTimeline logs what kstatus and Argo CD said of both objects since mark.
func (a *gitopsApp) logTimeline(t *testing.T, g Gomega, mark gitopsMark) {
	t.Helper()
	t.Logf("Rollout: %s", strings.Join(a.health.timeline(g, mark, "Rollout"), " → "))
	t.Logf("CloneSet: %s", strings.Join(a.health.timeline(g, mark, "CloneSet"), " → "))
}

func gitopsWantRollout(u *unstructured.Unstructured) string {
	if !gitopsObserved(u) {
		return gitopsInProgress
	}
	switch stepwisev1.RolloutPhase(gitopsString(u, "status", "phase")) {
	case stepwisev1.RolloutHealthy:
		if ready, _, _ := gitopsCondition(u, meta.ReadyCondition); ready == string(metav1.ConditionTrue) {
			return gitopsCurrent
		}
		return gitopsInProgress
	case stepwisev1.RolloutPaused:
		return gitopsSuspended
	case stepwisev1.RolloutAborted:
		return gitopsFailed
	}
	return gitopsInProgress
}

// gitopsWantCloneSet is InProgress/Progressing while the update revision
// waits for the Rollout, or the status shows Pods that are not where the
// applied partition puts them; "" otherwise, as Pods being updated in
// place are not all visible in the status.
func gitopsWantCloneSet(u *unstructured.Unstructured) string {
	if !gitopsObserved(u) || !gitopsAcknowledged(u) {
		return gitopsInProgress
	}
	desired, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		desired = 1
	}
	st := func(f string) int64 { return gitopsInt(u, "status", f) }
	expected := st("expectedUpdatedReplicas")
	complete := gitopsString(u, "status", "currentRevision") == gitopsString(u, "status", "updateRevision")
	if st("replicas") != desired || st("readyReplicas") != desired || st("updatedReadyReplicas") < expected ||
		(st("updatedReplicas") > expected && !complete) {
		return gitopsInProgress
	}
	return ""
}

// gitopsAcknowledged reports whether the Rollout governing the CloneSet
// acknowledged its update revision (status.rollout.revision), as far as
// the CloneSet's status tells; true when no Rollout governs it.
func gitopsAcknowledged(u *unstructured.Unstructured) bool {
	if _, governed, _ := unstructured.NestedMap(u.Object, "status", "rollout"); !governed {
		return true
	}
	return gitopsString(u, "status", "rollout", "revision") == gitopsString(u, "status", "updateRevision")
}

// gitopsAppliedPartition is the partition the CloneSet applies: its
// Rollout's (status.rollout.partition) while one governs it, else the
// spec's; "" when unset.
func gitopsAppliedPartition(u *unstructured.Unstructured) string {
	if _, governed, _ := unstructured.NestedMap(u.Object, "status", "rollout"); governed {
		return gitopsIntOrString(u, "status", "rollout", "partition")
	}
	return gitopsPartition(u)
}

// gitopsGovernor is status.rollout as "<revision>/<partition>"; "" when no
// Rollout governs.
func gitopsGovernor(u *unstructured.Unstructured) string {
	if _, governed, _ := unstructured.NestedMap(u.Object, "status", "rollout"); !governed {
		return ""
	}
	return gitopsString(u, "status", "rollout", "revision") + "/" + gitopsIntOrString(u, "status", "rollout", "partition")
}

// gitopsGrant is a Rollout's status.partitionGrant as
// "<revision>/<partition>"; "" when it has none.
func gitopsGrant(u *unstructured.Unstructured) string {
	if _, found, _ := unstructured.NestedMap(u.Object, "status", "partitionGrant"); !found {
		return ""
	}
	return gitopsString(u, "status", "partitionGrant", "revision") + "/" + gitopsIntOrString(u, "status", "partitionGrant", "partition")
}

// gitopsHeldIdle reports a CloneSet holding every Pod on the current
// revision while its update revision is acknowledged (Rollout paused,
// or aborted), every Pod ready, and a status that says so.
func gitopsHeldIdle(u *unstructured.Unstructured) bool {
	return gitopsObserved(u) && gitopsAcknowledged(u) && gitopsAppliedPartition(u) == "100%" &&
		gitopsString(u, "status", "updateRevision") != gitopsString(u, "status", "currentRevision") &&
		gitopsInt(u, "status", "updatedReplicas") == 0 && gitopsInt(u, "status", "readyReplicas") == gitopsReplicas &&
		// Counts of the update revision that fell to 0 must say so.
		gitopsInt(u, "status", "expectedUpdatedReplicas") == 0 && gitopsInt(u, "status", "updatedAvailableReplicas") == 0
}

// gitopsPartition is spec.updateStrategy.partition as git left it; "" when unset.
func gitopsPartition(u *unstructured.Unstructured) string {
	return gitopsIntOrString(u, "spec", "updateStrategy", "partition")
}

// gitopsOwners returns the managers whose entries in managedFields (the
// status subresource's left out) hold the field at path, sorted.
func gitopsOwners(u *unstructured.Unstructured, path ...string) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &node); err != nil {
			continue
		}
		held := true
		for _, f := range path {
			child, ok := node["f:"+f].(map[string]any)
			if !ok {
				held = false
				break
			}
			node = child
		}
		if held && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}

func gitopsPartitionOwners(u *unstructured.Unstructured) []string {
	return gitopsOwners(u, "spec", "updateStrategy", "partition")
}

// premature returns the spans since mark in which Flux's wait (every object
// of the commit Current) or an Argo CD app's health (every object Healthy)
// would have passed while the CloneSet held a template the Rollout had not
// taken up yet. A CloneSet that waits for its Rollout reports so, so there
// are none.
func (h *gitopsHealth) premature(g Gomega, mark gitopsMark) []time.Duration {
	var (
		ro, cs *gitopsSample
		start  time.Time
		spans  []time.Duration
	)
	// Both objects as they were at mark, then every change.
	ro, cs = h.before(mark, "Rollout"), h.before(mark, "CloneSet")
	for _, s := range h.since(g, mark, "") {
		if s.kind() == "Rollout" {
			ro = &s
		} else {
			cs = &s
		}
		bad := ro != nil && cs != nil && gitopsHasStatus(ro.obj) && gitopsHasStatus(cs.obj) &&
			(ro.kstatus == "Current" && cs.kstatus == "Current" || ro.lua == "Healthy" && cs.lua == "Healthy") &&
			gitopsString(cs.obj, "status", "updateRevision") != gitopsString(ro.obj, "status", "stableRevision")
		switch {
		case bad && start.IsZero():
			start = s.at
		case !bad && !start.IsZero():
			spans = append(spans, s.at.Sub(start))
			start = time.Time{}
		}
	}
	if !start.IsZero() {
		spans = append(spans, time.Since(start))
	}
	return spans
}

// gitopsInOrder matches a sequence that holds want in this order, maybe
// with other elements between.
func gitopsInOrder(want ...string) OmegaMatcher {
	return WithTransform(func(seq []string) bool {
		i := 0
		for _, v := range seq {
			if i < len(want) && v == want[i] {
				i++
			}
		}
		return i == len(want)
	}, BeTrue())
}

// gitopsStripLeading drops the leading elements equal to v.
func gitopsStripLeading(seq []string, v string) []string {
	for len(seq) > 0 && seq[0] == v {
		seq = seq[1:]
	}
	return seq
}

func gitopsJoin(samples []gitopsSample) string {
	lines := make([]string, 0, len(samples))
	for _, s := range samples {
		lines = append(lines, s.String())
	}
	return strings.Join(lines, "\n")
}
