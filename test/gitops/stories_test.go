package gitops

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// stand is one tool delivering the app from the repository: what every
// story needs.
type stand struct {
	bed    *bed
	repo   *repo
	ns     string // the app's namespace
	status func(context.Context) toolStatus
	tool   string
	// interval is how often the tool applies git again (Flux) or compares
	// with it (Argo CD).
	interval time.Duration
	// setTimeout, for Flux, sets how long the Kustomization waits for
	// health before it fails and retries (re-applying git) every
	// retryInterval.
	setTimeout func(t *testing.T, d string)
	// ignoreRoute, for Argo CD, takes the route's ignore rule out of the
	// Application (false) or puts it back (true).
	ignoreRoute func(t *testing.T, on bool)
	// installStepwise creates the examples' "stepwise" object (a Flux
	// Kustomization, an Argo CD Application) over path in git;
	// stepwiseApplied waits until it has applied commit and returns what
	// the tool tracks as applied. uninstallStepwise deletes that object,
	// as a user tidying the tool's objects would, and waits until the tool
	// has finished deleting what it applied.
	installStepwise   func(t *testing.T, path string)
	stepwiseApplied   func(t *testing.T, commit string) []string
	uninstallStepwise func(t *testing.T)
	// trackCRD, for Argo CD, marks a CRD in git as the "stepwise"
	// Application's, which Argo CD itself never does.
	trackCRD func(crd *unstructured.Unstructured)
	first    string // the first commit, applied before the stories
	rec      *recorder
	// tag is the image tag git holds now.
	tag string
}

func runStories(t *testing.T, s *stand) {
	s.rec = record(t, s.bed, s.ns, s.status)
	s.rec.committed(s.first)
	s.tag = "6.7.0"
	t0 := time.Now()
	s.waitApplied(t, "the first commit to be applied and the Rollout to adopt it", s.first)
	logTimeline(t, s.rec.since(t0))
	for _, st := range []struct {
		name string
		run  func(*testing.T, *stand)
	}{
		{"1-Release", func(t *testing.T, s *stand) { s.release(t, "6.7.1") }},
		{"2-BadReleaseThenRevert", storyBadRelease},
		{"3-PartitionInGit", storyPartitionInGit},
		{"7-Drift", storyDrift},
		{"5-Prune", storyPrune},
		{"4-PlanFromGit", storyPlan},
		{"6-Traffic", storyTraffic},
		{"8-Uninstall", storyUninstall},
	} {
		if !t.Run(st.name, func(t *testing.T) { st.run(t, s) }) {
			return
		}
	}
}

func (s *stand) image() string { return imageRepo + ":" + s.tag }

// waitApplied waits until the tool reports commit ready and the Rollout
// is Healthy on it with every Pod on git's image.
func (s *stand) waitApplied(t *testing.T, what, commit string) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		ts, app := s.status(t.Context()), s.bed.app(t.Context(), s.ns)
		return ts.ready && ts.revision == commit && app.promoted() && app.onlyImage(s.image(), replicas), ts.text + " | " + app.String()
	})
}

// commitCloneSet commits the example CloneSet at tag, with edit applied to
// its text.
func (s *stand) commitCloneSet(t *testing.T, message, tag string, edit func([]byte) []byte) string {
	t.Helper()
	cs := appFiles(t, s.bed.root, tag, s.bed.prom.URL())[cloneSetPath]
	if edit != nil {
		cs = edit(cs)
	}
	c := s.repo.commit(message, map[string][]byte{cloneSetPath: cs})
	s.rec.committed(c)
	return c
}

// release commits tag and follows the tool until the Rollout has promoted
// it: the tool is never ready on the commit before the Rollout is Healthy
// on its revision, it says in progress meanwhile, and ready once it is.
func (s *stand) release(t *testing.T, tag string) []sample {
	t.Helper()
	return s.releaseEdited(t, tag, nil)
}

func (s *stand) releaseEdited(t *testing.T, tag string, edit func([]byte) []byte) []sample {
	t.Helper()
	t0 := time.Now()
	commit := s.commitCloneSet(t, "web "+tag, tag, edit)
	s.tag = tag
	s.waitApplied(t, "the release of "+tag+" to be promoted and "+s.tool+" to report it", commit)
	samples := s.rec.since(t0)
	logTimeline(t, samples)
	sawSteps, sawInProgress := map[string]bool{}, false
	for _, x := range samples {
		if x.app.phase == stepwisev1.RolloutProgressing || x.app.phase == stepwisev1.RolloutPaused {
			sawSteps[x.app.step] = true
		}
		if x.tool.revision == commit && !x.tool.ready {
			sawInProgress = true
		}
		if x.tool.ready && x.tool.revision == commit && (!x.app.promoted() || !x.app.onlyImage(s.image(), replicas)) {
			t.Errorf("%s reported commit %s ready before the Rollout promoted it: %s", s.tool, short(commit), x.line())
		}
	}
	if len(sawSteps) < 2 {
		t.Errorf("the Rollout was seen at steps %v only", sawSteps)
	}
	if !sawInProgress {
		t.Errorf("%s never reported commit %s as in progress", s.tool, short(commit))
	}
	return samples
}

// 2. A bad tag: the Rollout aborts on its analysis and moves the canaries
// back in place; the tool reports the failure naming the Rollout. `git
// revert` brings git back to the stable image, and the next release rolls
// forward and is promoted.
func storyBadRelease(t *testing.T, s *stand) {
	t0 := time.Now()
	bad := s.commitCloneSet(t, "web "+badTag, badTag, nil)
	eventually(t, "the Rollout to abort, the canaries to be back, and "+s.tool+" to report the failure", func() (bool, string) {
		ts, app := s.status(t.Context()), s.bed.app(t.Context(), s.ns)
		return !ts.ready && ts.revision == bad && namesFailedRollout(ts.text, s.ns) &&
			app.phase == stepwisev1.RolloutAborted && app.onlyImage(s.image(), replicas), ts.text + " | " + app.String()
	})
	logTimeline(t, s.rec.since(t0))

	t1 := time.Now()
	revert := s.repo.revert(bad)
	s.rec.committed(revert)
	s.waitApplied(t, "the revert to be applied and the Rollout Healthy on the stable revision", revert)
	logTimeline(t, s.rec.since(t1))
	s.release(t, "6.7.3")
}

// namesFailedRollout: the tool's status names Rollout web as what failed
// (Flux: "Rollout/<ns>/web status: 'Failed'"; Argo CD: the Rollout's
// health Degraded).
func namesFailedRollout(text, ns string) bool {
	return strings.Contains(text, "Rollout/"+ns+"/web status: 'Failed'") || strings.Contains(text, "Rollout/web Degraded")
}

const partitionLine = "    partition: 0\n"

// withPartition keeps an OpenKruise manifest's `partition: 0` in git.
func withPartition(cs []byte) []byte {
	return []byte(strings.Replace(string(cs), "    type: InPlaceIfPossible\n", "    type: InPlaceIfPossible\n"+partitionLine, 1))
}

// 3. git keeps `partition: 0` (a ported Kruise manifest); the tool applies
// it again and again. A release then moves every Pod exactly once, the
// tool reports no drift and does not flap, and no conflict is raised.
func storyPartitionInGit(t *testing.T, s *stand) {
	if !strings.Contains(string(withPartition(appFiles(t, s.bed.root, s.tag, "")[cloneSetPath])), partitionLine) {
		t.Fatal("the example CloneSet has no `type: InPlaceIfPossible` line to put the partition under")
	}
	t0 := time.Now()
	c := s.commitCloneSet(t, "web: keep the Kruise manifest's partition", s.tag, withPartition)
	s.waitApplied(t, "the partition commit to be applied", c)
	before := s.bed.app(t.Context(), s.ns).restarts
	s.releaseEdited(t, "6.7.4", withPartition)
	after := s.bed.app(t.Context(), s.ns)
	for pod, n := range after.restarts {
		if n-before[pod] != 1 {
			t.Errorf("Pod %s restarted %d times in the release, want once", pod, n-before[pod])
		}
	}
	// Settled: several re-applies later nothing moved and the tool never
	// left ready.
	t1 := time.Now()
	s.holdSteady(t, 25*time.Second)
	for _, x := range s.rec.since(t1) {
		if x.tool.settledBad {
			t.Errorf("%s reported a failure or drift after the release with the partition in git: %s", s.tool, x.line())
		}
	}
	ro := &stepwisev1.Rollout{}
	if err := s.bed.client.Get(t.Context(), types.NamespacedName{Namespace: s.ns, Name: "web"}, ro); err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(ro.Status.Conditions, stepwisev1.PartitionConflictCondition); c != nil && c.Status == "True" {
		t.Errorf("PartitionConflict raised: %s", c.Message)
	}
	if got := s.bed.app(t.Context(), s.ns).restarts; !maps.Equal(got, after.restarts) {
		t.Errorf("Pods restarted while the tool re-applied git: %v, then %v", after.restarts, got)
	}
	logTimeline(t, s.rec.since(t0))
}

// holdSteady lets the tool run for d (a few of its intervals: Flux
// re-applies every 10 s, Argo CD compares every 5 s); it is the one wait
// the stories make on a clock, since "nothing happens" has no event.
func (s *stand) holdSteady(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-t.Context().Done():
	case <-time.After(d):
	}
}

// 7. Someone edits the CloneSet's image by hand. The tool puts git's
// image back; every Pod ends on git's image, the Rollout is Healthy on
// git's revision, and no Pod restarted more than twice.
func storyDrift(t *testing.T, s *stand) {
	t0 := time.Now()
	before := s.bed.app(t.Context(), s.ns).restarts
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"` + imageRepo + `:6.9.9"}]}}}}`)
	cs := &stepwisev1.CloneSet{}
	cs.Namespace, cs.Name = s.ns, "web"
	if err := s.bed.client.Patch(t.Context(), cs, client.RawPatch(types.StrategicMergePatchType, patch), client.FieldOwner("kubectl-edit")); err != nil {
		// CRDs take no strategic merge patch: a JSON patch of the image.
		jp := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"` + imageRepo + `:6.9.9"}]`)
		if err := s.bed.client.Patch(t.Context(), cs, client.RawPatch(types.JSONPatchType, jp), client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, s.tool+" to put git's image back and the Rollout Healthy on git's revision", func() (bool, string) {
		got := &stepwisev1.CloneSet{}
		if err := s.bed.client.Get(t.Context(), client.ObjectKeyFromObject(cs), got); err != nil {
			return false, err.Error()
		}
		ts, app := s.status(t.Context()), s.bed.app(t.Context(), s.ns)
		return got.Spec.Template.Spec.Containers[0].Image == s.image() && ts.ready && app.promoted() && app.onlyImage(s.image(), replicas),
			got.Spec.Template.Spec.Containers[0].Image + " | " + ts.text + " | " + app.String()
	})
	logTimeline(t, s.rec.since(t0))
	for pod, n := range s.bed.app(t.Context(), s.ns).restarts {
		if n-before[pod] > 2 {
			t.Errorf("Pod %s restarted %d times for the drift, want at most 2", pod, n-before[pod])
		}
	}
}

// 5. The Rollout is removed from git; the tool prunes it; the CloneSet is
// governed no more and no Pod restarts.
func storyPrune(t *testing.T, s *stand) {
	t0 := time.Now()
	before := s.bed.app(t.Context(), s.ns).restarts
	c := s.repo.commit("web: no Rollout", map[string][]byte{rolloutPath: nil})
	s.rec.committed(c)
	eventually(t, s.tool+" to prune the Rollout and the CloneSet to be governed no more", func() (bool, string) {
		ts := s.status(t.Context())
		err := s.bed.client.Get(t.Context(), types.NamespacedName{Namespace: s.ns, Name: "web"}, &stepwisev1.Rollout{})
		cs := &stepwisev1.CloneSet{}
		if err := s.bed.client.Get(t.Context(), types.NamespacedName{Namespace: s.ns, Name: "web"}, cs); err != nil {
			return false, err.Error()
		}
		gov := apimeta.FindStatusCondition(cs.Status.Conditions, stepwisev1.GovernedCondition)
		released := gov != nil && gov.Status == "False" && gov.Reason == stepwisev1.ReasonRolloutGone
		return apierrors.IsNotFound(err) && ts.ready && ts.revision == c && released, ts.text
	})
	logTimeline(t, s.rec.since(t0))
	if got := s.bed.app(t.Context(), s.ns); !maps.Equal(got.restarts, before) || !got.onlyImage(s.image(), replicas) {
		t.Errorf("Pods moved when the Rollout was pruned: restarts %v, then %v; %s", before, got.restarts, got)
	}
}

// 4. `kubectl stepwise plan -f cloneset.yaml` writes the Rollout from the
// CloneSet in git; it is committed; the tool applies it, and the next
// release walks that plan.
func storyPlan(t *testing.T, s *stand) {
	plugin := filepath.Join(t.TempDir(), "kubectl-stepwise")
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-stepwise")
	build.Dir = s.bed.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	// docs/gitops.md's command, with the test's pause.
	plan := exec.Command(plugin, "plan", "-f", cloneSetPath, "--steps", "10%,50%,100%", "--pause", "3s")
	plan.Dir = s.repo.dir
	out, err := plan.Output()
	if err != nil {
		t.Fatalf("kubectl stepwise plan: %v", err)
	}
	t0 := time.Now()
	c := s.repo.commit("web: the Rollout kubectl stepwise plan wrote", map[string][]byte{rolloutPath: out})
	s.rec.committed(c)
	eventually(t, s.tool+" to apply the planned Rollout and the Rollout to govern the CloneSet", func() (bool, string) {
		ts, app := s.status(t.Context()), s.bed.app(t.Context(), s.ns)
		return ts.ready && ts.revision == c && app.promoted(), ts.text + " | " + app.String()
	})
	ro := &stepwisev1.Rollout{}
	if err := s.bed.client.Get(t.Context(), types.NamespacedName{Namespace: s.ns, Name: "web"}, ro); err != nil {
		t.Fatal(err)
	}
	var partitions []string
	for _, st := range ro.Spec.Steps {
		partitions = append(partitions, st.Partition.String())
	}
	if got := strings.Join(partitions, ","); got != "90%,50%,0" {
		t.Errorf("the applied Rollout's partitions are %s, want the plan's 90%%,50%%,0", got)
	}
	logTimeline(t, s.rec.since(t0))
	s.release(t, "6.7.5")
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// installPath is where storyUninstall commits Stepwise's CRDs, beside
// two ConfigMaps that have nothing to keep them from being deleted.
const installPath = "install"

// 8. Stepwise's install is deleted by the tool that applied it, in the two
// ways a tool deletes: its object (the examples' "stepwise") is deleted,
// and the install leaves git while the tool prunes. The tool deletes the
// rest of what it applied, but not the CRDs: had one gone, every object of
// its kind would have gone with it, CloneSets and Rollouts mid-release,
// and the garbage collector would have deleted the CloneSets' Pods.
//
// Flux keeps them for their kustomize.toolkit.fluxcd.io/prune: disabled.
// Argo CD never deletes a CRD with its Application and never marks one as
// an Application's (argoproj/argo-cd#1425), so it prunes only a CRD that
// arrives marked, by a templating tool or an Argo CD that tracks CRDs
// (argoproj/argo-cd#27907): trackCRD commits them marked, and their
// Prune=false keeps them. Deleting the Application keeps even marked CRDs
// with no annotation, which is why the CRDs carry no Delete=false. Without
// the annotations, Flux deletes all four both ways and Argo CD prunes them.
func storyUninstall(t *testing.T, s *stand) {
	before := s.bed.app(t.Context(), s.ns)
	files := map[string][]byte{}
	var crds []string
	bases := filepath.Join(s.bed.root, "config", "crd", "bases")
	entries, err := os.ReadDir(bases)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		crd := readDocs(t, bases, e.Name())[0]
		if s.trackCRD != nil {
			s.trackCRD(crd)
		}
		files[installPath+"/"+e.Name()] = toYAML(t, crd)
		crds = append(crds, crd.GetName())
	}
	configMap := func(name string) []byte {
		return []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + s.ns + "\n")
	}
	// probe shows that the tool deleted what it applied; anchor keeps the
	// path in git once the rest has left it (Argo CD fails a sync of a
	// path that is gone).
	files[installPath+"/probe.yaml"] = configMap("uninstall-probe")
	files[installPath+"/anchor.yaml"] = configMap("uninstall-anchor")
	install := func(t *testing.T, commit string) {
		t.Helper()
		applied := strings.Join(s.stepwiseApplied(t, commit), " ")
		for _, name := range append(crds, "uninstall-probe") {
			if !strings.Contains(applied, name) {
				t.Fatalf("%s did not apply %s; it applied %s", s.tool, name, applied)
			}
		}
	}
	kept := func(t *testing.T, how string) {
		t.Helper()
		if err := s.bed.client.Get(t.Context(), types.NamespacedName{Namespace: s.ns, Name: "uninstall-probe"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s left ConfigMap uninstall-probe when %s: %v", s.tool, how, err)
		}
		for _, name := range crds {
			crd, err := s.bed.get(t.Context(), crdGVK, "", name)
			if err != nil {
				t.Errorf("CRD %s, when %s: %v", name, how, err)
			} else if crd.GetDeletionTimestamp() != nil {
				t.Errorf("CRD %s is being deleted: %s", name, how)
			}
		}
		if got := s.bed.app(t.Context(), s.ns); got.rolloutErr != nil || !maps.Equal(got.restarts, before.restarts) || !got.onlyImage(s.image(), replicas) {
			t.Errorf("the app changed when %s: restarts %v, then %v; %s", how, before.restarts, got.restarts, got)
		}
	}

	t.Run("ToolObjectDeleted", func(t *testing.T) {
		c := s.repo.commit("Stepwise's CRDs, and ConfigMaps", files)
		s.rec.committed(c)
		s.installStepwise(t, installPath)
		install(t, c)
		t0 := time.Now()
		s.uninstallStepwise(t)
		logTimeline(t, s.rec.since(t0))
		kept(t, s.tool+" deleted its object that installed Stepwise")
	})
	t.Run("PrunedFromGit", func(t *testing.T) {
		s.installStepwise(t, installPath)
		install(t, s.repo.head)
		gone := map[string][]byte{installPath + "/probe.yaml": nil}
		for _, e := range entries {
			gone[installPath+"/"+e.Name()] = nil
		}
		c := s.repo.commit("no Stepwise", gone)
		s.rec.committed(c)
		t0 := time.Now()
		s.stepwiseApplied(t, c)
		logTimeline(t, s.rec.since(t0))
		kept(t, "Stepwise's install left git and "+s.tool+" pruned")
		s.uninstallStepwise(t)
	})
}
