package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/argocdhealth"
)

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

// premature returns the spans since mark in which Flux's wait (every object
// of the commit Current) or an Argo CD app's health (every object Healthy)
// would have passed while the CloneSet held a template the Rollout had not
// taken up yet, each with the two versions that opened it. A CloneSet that
// waits for its Rollout reports so, so there are none.
//
// The two kinds come on two watches, whose events may arrive in either
// order: a CloneSet acknowledging a grant could be seen before the Rollout
// status that wrote the grant. So the versions are taken in the order etcd
// wrote them (resourceVersion, one counter for the whole store here), the
// order a reader that sees the CloneSet's version could have seen the
// Rollout's.
func (h *gitopsHealth) premature(g Gomega, mark gitopsMark) []string {
	samples := h.since(g, mark, "")
	rvs := make(map[*unstructured.Unstructured]int64, len(samples))
	for _, s := range samples {
		rv, err := strconv.ParseInt(s.obj.GetResourceVersion(), 10, 64)
		g.Expect(err).NotTo(HaveOccurred(), "resourceVersion of %s", s)
		rvs[s.obj] = rv
	}
	slices.SortStableFunc(samples, func(a, b gitopsSample) int { return cmp.Compare(rvs[a.obj], rvs[b.obj]) })

	var spans []string
	open := ""
	ro, cs := h.before(mark, "Rollout"), h.before(mark, "CloneSet")
	for _, s := range samples {
		if s.kind() == "Rollout" {
			ro = &s
		} else {
			cs = &s
		}
		bad := ro != nil && cs != nil && gitopsHasStatus(ro.obj) && gitopsHasStatus(cs.obj) &&
			(ro.kstatus == "Current" && cs.kstatus == "Current" || ro.lua == "Healthy" && cs.lua == "Healthy") &&
			gitopsString(cs.obj, "status", "updateRevision") != gitopsString(ro.obj, "status", "stableRevision")
		switch {
		case bad && open == "":
			open = ro.String() + "\n  with " + cs.String()
		case !bad && open != "":
			spans = append(spans, open+"\n  until "+s.String())
			open = ""
		}
	}
	if open != "" {
		spans = append(spans, open+"\n  until the end")
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
