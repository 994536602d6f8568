package e2e

import (
	"context"
	"encoding/json"
	"fmt"
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
	// partition is the CloneSet's spec.updateStrategy.partition in git;
	// "" leaves the field out, which is what the docs ask for.
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
		strategy["partition"] = m.partition
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
// of every state its Rollout and CloneSet went through.
type gitopsApp struct {
	e      *rolloutEnv
	mode   gitopssync.Mode
	ns     string
	repo   *gitopssync.Repo
	syncer *gitopssync.Syncer
	health *gitopsHealth
	// git is what HEAD holds.
	git gitopsManifests
	// syncOpts are the options the syncer runs with.
	syncOpts gitopssync.Options
}

// gitopsNewApp makes the namespace, the repository (empty) and the
// recorder; gitopsFirstCommit starts the syncer.
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
		git: gitopsManifests{ns: ns, promURL: e.prom.URL(), version: "1.0.0", plan: gitopsTimedPlan},
		syncOpts: gitopssync.Options{
			Repo: repo, Path: "apps", Client: e.client, Mode: mode, Interval: gitopsSyncInterval,
			Logf: t.Logf,
		},
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

// startSyncer starts (or restarts, with new options) the syncer, which
// applies HEAD at once.
func (a *gitopsApp) startSyncer(t *testing.T) {
	t.Helper()
	if a.syncer != nil {
		a.syncer.Stop()
	}
	s, err := gitopssync.Start(t.Context(), a.syncOpts)
	if err != nil {
		t.Fatalf("starting the syncer: %v", err)
	}
	a.syncer = s
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

func (a *gitopsApp) sync(t *testing.T) {
	t.Helper()
	if a.syncer == nil {
		a.startSyncer(t)
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

func (a *gitopsApp) cloneSet(g Gomega) *stepwisev1.CloneSet { return a.e.get(g, a.ns, "web") }

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
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		rev = cs.Status.UpdateRevision
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	return rev
}

// waitHealthyAt waits for a finished rollout: Healthy on revision, Ready,
// partition back at 100%, every Pod on the revision.
func (a *gitopsApp) waitHealthyAt(t *testing.T, revision string) *stepwisev1.Rollout {
	t.Helper()
	ro := a.waitRollout(t, "Healthy on "+revision, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(revision))
		g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, meta.ReadyCondition)).To(BeTrue())
		cs := a.cloneSet(g)
		g.Expect(cs.Spec.UpdateStrategy.Partition).To(HaveValue(Equal(intstr.FromString("100%"))))
	})
	a.e.waitSettled(t, a.ns, "web", gitopsReplicas, gitopsReplicas, settleTimeout)
	return ro
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

// warnings returns the notes of the Rollout's Events with reason.
func (a *gitopsApp) events(g Gomega, reason string) []string {
	var list eventsv1.EventList
	g.Expect(a.e.client.List(context.Background(), &list, client.InNamespace(a.ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "Rollout" && ev.Reason == reason {
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

// templateChanges counts the changes of the CloneSet's spec, partition
// left out, since mark: what only a commit may cause.
func (h *gitopsHealth) templateChanges(g Gomega, mark int) int {
	n := 0
	samples := h.since(g, mark, "CloneSet")
	if prev := h.before(mark, "CloneSet"); prev != nil {
		samples = append([]gitopsSample{*prev}, samples...)
	}
	var last map[string]any
	for _, s := range samples {
		spec, _, _ := unstructured.NestedMap(s.obj.Object, "spec")
		unstructured.RemoveNestedField(spec, "updateStrategy", "partition")
		if last != nil && !apiequality.Semantic.DeepEqual(last, spec) {
			n++
		}
		last = spec
	}
	return n
}

// expectSyncerChangedOnlyGit asserts what the syncer did since t0 and
// mark: no apply failed, re-applies ran, and the CloneSet's spec changed
// (partition aside) exactly commits times. A re-apply may still report
// "configured" under server-side apply: fluxcd/pkg/ssa reads the object,
// then dry-runs, and takes a partition written in between by the Rollout
// for drift; the apply that follows sends no partition, so it changes
// nothing, which the spec count and the partition's owners show.
func (a *gitopsApp) expectSyncerChangedOnlyGit(t *testing.T, g Gomega, t0 time.Time, mark, commits int) {
	a.expectNoSyncErrors(g, t0)
	unchanged, changed := a.reapplies(t0)
	g.Expect(len(unchanged)+len(changed)).To(BeNumerically(">=", 3), "the syncer kept re-applying")
	g.Expect(a.health.templateChanges(g, mark)).To(Equal(commits), "spec changes of the CloneSet other than the partition")
	if a.mode == gitopssync.ClientSideApply {
		// One read, one patch: nothing to race with.
		g.Expect(changed).To(BeEmpty(), "a re-apply of the same commit patched the CloneSet")
	}
	t.Logf("%d re-applies of an applied commit: %d unchanged, %d configured", len(unchanged)+len(changed), len(unchanged), len(changed))
}

// gitopsHealth records every version of a namespace's Rollouts and
// CloneSets, from watches, with what kstatus (Flux) and the shipped Lua
// (Argo CD) say of each: a health check polls, and could land on any of
// them.
type gitopsHealth struct {
	rolloutLua, cloneSetLua string

	mu      sync.Mutex
	samples []gitopsSample
	broken  bool
}

// gitopsSample is one version of an object and its health.
type gitopsSample struct {
	at  time.Time
	obj *unstructured.Unstructured
	// kstatus is status.Compute's verdict, lua the health script's.
	kstatus, kstatusMessage string
	lua, luaMessage         string
	err                     error
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
	for _, kind := range []string{"RolloutList", "CloneSetList"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(stepwisev1.GroupVersion.WithKind(kind))
		w, err := e.watcher.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || ev.Type == watch.Error || ev.Type == watch.Deleted {
					continue
				}
				h.observe(u)
			}
			if ctx.Err() == nil {
				h.mu.Lock()
				h.broken = true
				h.mu.Unlock()
			}
		}()
	}
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
func (h *gitopsHealth) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.samples)
}

func (h *gitopsHealth) since(g Gomega, mark int, kind string) []gitopsSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	g.Expect(h.broken).To(BeFalse(), "the watches ran for the whole story")
	var out []gitopsSample
	for _, s := range h.samples[mark:] {
		if kind == "" || s.kind() == kind {
			out = append(out, s)
		}
	}
	return out
}

// before returns the last sample of kind before mark: the state a story
// started from; nil when there is none.
func (h *gitopsHealth) before(mark int, kind string) *gitopsSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := mark - 1; i >= 0; i-- {
		if h.samples[i].kind() == kind {
			s := h.samples[i]
			return &s
		}
	}
	return nil
}

// verdicts is the sequence of "<kstatus>/<lua>" of kind's samples since
// mark, without consecutive repeats and without objects that have no
// status yet.
func (h *gitopsHealth) verdicts(g Gomega, mark int, kind string) []string {
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
// without consecutive repeats: the phase and reason of a Rollout, the Ready
// reason of a CloneSet ("gen" while its spec is not yet observed).
func (h *gitopsHealth) timeline(g Gomega, mark int, kind string) []string {
	var out []string
	for _, s := range h.since(g, mark, kind) {
		if !gitopsHasStatus(s.obj) {
			continue
		}
		state := "gen"
		switch {
		case !gitopsObserved(s.obj):
		case kind == "Rollout":
			state = gitopsString(s.obj, "status", "phase") + "/" + gitopsString(s.obj, "status", "reason")
		default:
			_, state, _ = gitopsCondition(s.obj, meta.ReadyCondition)
		}
		if v := state + ": " + s.verdict(); len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// partitions is the CloneSet's partition over time since mark, without
// consecutive repeats; "" is unset.
func (h *gitopsHealth) partitions(g Gomega, mark int) []string {
	var out []string
	for _, s := range h.since(g, mark, "CloneSet") {
		if p := gitopsPartition(s.obj); len(out) == 0 || out[len(out)-1] != p {
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

// expectTruthful checks every sample since mark against what the object
// reports of itself:
//   - a Rollout: spec not yet observed → InProgress/Progressing; Healthy and
//     Ready → Current/Healthy; Progressing → InProgress/Progressing; Paused →
//     InProgress/Suspended; Aborted → Failed/Degraded;
//   - a CloneSet: spec not yet observed, or Pods not where the spec and
//     partition put them → InProgress/Progressing;
//   - both: kstatus and Argo CD agree (Current with Healthy, InProgress with
//     Progressing or Suspended, Failed with Degraded), and both evaluate
//     without error.
//
// Objects without a status (created, not yet reconciled) are left out:
// kstatus calls them Current by its generic rule; see gitopsNoStatus.
func (h *gitopsHealth) expectTruthful(g Gomega, mark int) {
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
func (a *gitopsApp) logTimeline(t *testing.T, g Gomega, mark int) {
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

// gitopsWantCloneSet is InProgress/Progressing while the status shows Pods
// that are not where spec and partition put them; "" otherwise, as Pods
// being updated in place are not all visible in the status.
func gitopsWantCloneSet(u *unstructured.Unstructured) string {
	if !gitopsObserved(u) {
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

// gitopsArmedIdle reports a CloneSet held at 100% with a template none of
// its Pods run, every Pod ready on the current revision, and a status that
// says so.
func gitopsArmedIdle(u *unstructured.Unstructured) bool {
	return gitopsObserved(u) && gitopsPartition(u) == "100%" &&
		gitopsString(u, "status", "updateRevision") != gitopsString(u, "status", "currentRevision") &&
		gitopsInt(u, "status", "updatedReplicas") == 0 && gitopsInt(u, "status", "readyReplicas") == gitopsReplicas &&
		// Counts of the update revision that fell to 0 must say so.
		gitopsInt(u, "status", "expectedUpdatedReplicas") == 0 && gitopsInt(u, "status", "updatedAvailableReplicas") == 0
}

func gitopsPartition(u *unstructured.Unstructured) string {
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "updateStrategy", "partition")
	if !found || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// gitopsOwners returns the managers whose spec entries in managedFields
// hold the field at path, sorted.
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

// expectPartitionOursOnly asserts that every version of the CloneSet since
// mark that had a partition had it owned by the Rollout controller alone.
func (h *gitopsHealth) expectPartitionOursOnly(g Gomega, mark int) {
	var bad []string
	for _, s := range h.since(g, mark, "CloneSet") {
		if gitopsPartition(s.obj) == "" {
			continue
		}
		if owners := gitopsPartitionOwners(s.obj); !slices.Equal(owners, []string{workload.FieldManager}) {
			bad = append(bad, s.String())
		}
	}
	g.Expect(bad).To(BeEmpty(), "partition owned by another manager than %s", workload.FieldManager)
}

// premature returns the spans since mark in which Flux's wait (every object
// of the commit Current) or an Argo CD app's health (every object Healthy)
// would have passed while the CloneSet held a template the Rollout had not
// taken up yet: between the CloneSet's status write and the Rollout's reaction.
func (h *gitopsHealth) premature(g Gomega, mark int) []time.Duration {
	var (
		ro, cs *unstructured.Unstructured
		start  time.Time
		spans  []time.Duration
	)
	// Both objects as they were at mark, then every change.
	if prev := h.before(mark, "Rollout"); prev != nil {
		ro = prev.obj
	}
	if prev := h.before(mark, "CloneSet"); prev != nil {
		cs = prev.obj
	}
	for _, s := range h.since(g, mark, "") {
		if s.kind() == "Rollout" {
			ro = s.obj
		} else {
			cs = s.obj
		}
		bad := ro != nil && cs != nil && gitopsHasStatus(ro) && gitopsHasStatus(cs) &&
			gitopsWantRollout(ro) == gitopsCurrent && gitopsObserved(cs) && gitopsWantCloneSet(cs) == "" &&
			gitopsString(cs, "status", "updateRevision") != gitopsString(ro, "status", "stableRevision")
		switch {
		case bad && start.IsZero():
			start = s.at
		case !bad && !start.IsZero():
			spans = append(spans, s.at.Sub(start))
			start = time.Time{}
		}
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
