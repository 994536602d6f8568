package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
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

// logTimeline logs what kstatus and Argo CD said of both objects since mark.
func (a *gitopsApp) logTimeline(t *testing.T, g Gomega, mark gitopsMark) {
	t.Helper()
	t.Logf("Rollout: %s", strings.Join(a.health.timeline(g, mark, "Rollout"), " → "))
	t.Logf("CloneSet: %s", strings.Join(a.health.timeline(g, mark, "CloneSet"), " → "))
}
