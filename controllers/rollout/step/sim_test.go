package step

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The scenarios replay Decide against a small simulated workload: each
// decision's status is fed back as the next input, its partition is applied
// to the workload (which then reports a stale observedGeneration until a
// converge action), and the actions between calls stand for the world moving
// (Pods becoming ready, git commits, requests, the clock).

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const replicas = 10

// sim is the world between two calls.
type sim struct {
	in Input
}

type action func(*sim)

// call is one Decide call: actions first, then the expectations.
type call struct {
	do   []action
	want want
}

// want checks the fields it sets; empty strings and nil slices are not checked.
type want struct {
	phase     v1alpha1.RolloutPhase
	reason    string
	step      string // "-": no step; "0", "1", ...
	partition string // "100%", "50%", "0", ...
	stable    string
	canary    string // "-": none
	analysis  string // "Keep", "Start", "Run" or "Clear"
	// background is Decision.Background, as analysis.
	background string
	// post is Decision.PostPromotion, as analysis.
	post    string
	requeue string // a time.Duration's String(), "0s" for none
	message string // substring
	// previous is PreviousStableRevisions joined with ",", "-" for none.
	previous string
	// full is PromotedFull, "true" or "false".
	full   string
	events []string
}

type scenario struct {
	name  string
	setup []action
	calls []call
}

func step(p intstr.IntOrString, opts ...func(*Step)) Step {
	pods, err := ResolvePartition(p, replicas)
	if err != nil {
		panic(err)
	}
	s := Step{Partition: p, Pods: pods}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func pct(s string) intstr.IntOrString { return intstr.FromString(s) }
func num(n int32) intstr.IntOrString  { return intstr.FromInt32(n) }

func pause(d time.Duration) func(*Step) {
	return func(s *Step) { s.Pause, s.PauseDuration = true, d }
}

func analysed(policy v1alpha1.InconclusivePolicy) func(*Step) {
	return func(s *Step) { s.Analysis, s.Inconclusive = true, policy }
}

// defaultPlan: 90% with a 1m pause, 50% with an analysis, then 0.
func defaultPlan() []Step {
	return []Step{
		step(pct("90%"), pause(time.Minute)),
		step(pct("50%"), analysed("")),
		step(num(0)),
	}
}

// newSim is a Rollout idle at stable revision r1, armed, with a 10-Pod workload.
func newSim() *sim {
	return &sim{in: Input{
		Now:              t0,
		Steps:            defaultPlan(),
		ProgressDeadline: 10 * time.Minute,
		Status: Status{
			Phase: v1alpha1.RolloutHealthy, Reason: v1alpha1.ReasonStable,
			StableRevision: "r1", UpdatedReadyReplicas: replicas,
		},
		Workload: Workload{
			ObservedGenerationCurrent: true, Replicas: replicas, UpdatedReadyReplicas: replicas,
			UpdateRevision: "r1", CurrentRevision: "r1", Partition: replicas,
		},
	}}
}

// apply plays the executor: status written back, partition applied (the
// workload's observedGeneration goes stale when it changes), analysis reset.
func (s *sim) apply(d Decision) {
	s.in.Status = d.Status
	p, err := ResolvePartition(d.Partition, s.in.Workload.Replicas)
	if err != nil {
		panic(err)
	}
	if p != s.in.Workload.Partition {
		s.in.Workload.Partition = p
		s.in.Workload.ObservedGenerationCurrent = false
	}
	if d.Analysis == AnalysisStart || d.Analysis == AnalysisClear {
		s.in.Analysis = Analysis{}
	}
	if pp := s.in.PostPromotion; pp != nil {
		switch d.PostPromotion {
		case AnalysisStart:
			pp.Verdict = Analysis{Verdict: VerdictRunning}
		case AnalysisClear:
			pp.Verdict = Analysis{}
		}
	}
	if bg := s.in.Background; bg != nil {
		switch d.Background {
		case AnalysisStart:
			bg.Verdict = Analysis{Verdict: VerdictRunning}
		case AnalysisClear:
			bg.Verdict = Analysis{}
		}
	}
}

func tick(d time.Duration) action { return func(s *sim) { s.in.Now = s.in.Now.Add(d) } }

// converge: the workload observed its spec and every Pod it should update is updated and ready.
func converge() action {
	return func(s *sim) {
		w := &s.in.Workload
		w.ObservedGenerationCurrent = true
		w.UpdatedReadyReplicas = w.Replicas - w.Partition
	}
}

func observed() action { return func(s *sim) { s.in.Workload.ObservedGenerationCurrent = true } }
func stale() action    { return func(s *sim) { s.in.Workload.ObservedGenerationCurrent = false } }
func ready(n int32) action {
	return func(s *sim) { s.in.Workload.UpdatedReadyReplicas = n }
}

// commit is a new template in git: the workload reports a new update
// revision with no Pod on it yet.
func commit(rev string) action {
	return func(s *sim) {
		s.in.Workload.UpdateRevision = rev
		s.in.Workload.UpdatedReadyReplicas = 0
		s.in.Workload.ObservedGenerationCurrent = true
	}
}

// revert is a template back at rev, with n Pods on it and ready.
func revert(rev string, n int32) action {
	return func(s *sim) {
		commit(rev)(s)
		s.in.Workload.UpdatedReadyReplicas = n
	}
}

func verdict(v Verdict, msg string) action {
	return func(s *sim) { s.in.Analysis = Analysis{Verdict: v, Message: msg} }
}

func request(kind, token string) action {
	return func(s *sim) {
		r := &s.in.Requests
		field := map[string]*string{"promote": &r.Promote, "promote-full": &r.PromoteFull, "abort": &r.Abort, "retry": &r.Retry, "pause": &r.Pause, "resume": &r.Resume}[kind]
		*field = token
	}
}

func specPaused(p bool) action        { return func(s *sim) { s.in.Paused = p } }
func violation(msg string) action     { return func(s *sim) { s.in.VersionViolation = msg } }
func downgrade(b bool) action         { return func(s *sim) { s.in.Downgrade = b } }
func steps(st ...Step) action         { return func(s *sim) { s.in.Steps = st } }
func deadline(d time.Duration) action { return func(s *sim) { s.in.ProgressDeadline = d } }
func status(f func(*Status)) action   { return func(s *sim) { f(&s.in.Status) } }
func workload(f func(*Workload)) action {
	return func(s *sim) { f(&s.in.Workload) }
}

func run(t *testing.T, sc scenario) {
	t.Helper()
	s := newSim()
	for _, a := range sc.setup {
		a(s)
	}
	for i, c := range sc.calls {
		for _, a := range c.do {
			a(s)
		}
		d := Decide(s.in)
		if again := Decide(s.in); !reflect.DeepEqual(d, again) {
			t.Fatalf("call %d: Decide is not deterministic:\n%+v\n%+v", i, d, again)
		}
		checkInvariants(t, i, s.in, d)
		c.want.check(t, i, d)
		if t.Failed() {
			t.Fatalf("call %d: decision %+v", i, d)
		}
		s.apply(d)
	}
}

func (w want) check(t *testing.T, i int, d Decision) {
	t.Helper()
	s := d.Status
	eq := func(field, got, want string) {
		if want != "" && got != want {
			t.Errorf("call %d: %s = %q, want %q", i, field, got, want)
		}
	}
	eq("phase", string(s.Phase), string(w.phase))
	eq("reason", s.Reason, w.reason)
	stepGot := "-"
	if s.CurrentStepIndex != nil {
		stepGot = strconv.Itoa(int(*s.CurrentStepIndex))
	}
	eq("step", stepGot, w.step)
	eq("partition", d.Partition.String(), w.partition)
	eq("stable", s.StableRevision, w.stable)
	canary := s.CanaryRevision
	if canary == "" {
		canary = "-"
	}
	eq("canary", canary, w.canary)
	previous := strings.Join(s.PreviousStableRevisions, ",")
	if previous == "" {
		previous = "-"
	}
	eq("previous", previous, w.previous)
	eq("full", strconv.FormatBool(s.PromotedFull), w.full)
	action := string(d.Analysis)
	if action == "" {
		action = "Keep"
	}
	eq("analysis", action, w.analysis)
	bg := string(d.Background)
	if bg == "" {
		bg = "Keep"
	}
	eq("background", bg, w.background)
	post := string(d.PostPromotion)
	if post == "" {
		post = "Keep"
	}
	eq("post", post, w.post)
	eq("requeue", d.RequeueAfter.String(), w.requeue)
	if w.message != "" && !strings.Contains(s.Message, w.message) {
		t.Errorf("call %d: message %q does not contain %q", i, s.Message, w.message)
	}
	if w.events != nil {
		var got []string
		for _, e := range d.Events {
			got = append(got, e.Reason)
		}
		if strings.Join(got, ",") != strings.Join(w.events, ",") {
			t.Errorf("call %d: events %v, want %v (%+v)", i, got, w.events, d.Events)
		}
	}
}

// checkInvariants holds for every decision, whatever the scenario.
func checkInvariants(t *testing.T, i int, in Input, d Decision) {
	t.Helper()
	s := d.Status
	if d.Partition.Type == intstr.String && d.Partition.StrVal == "" {
		t.Errorf("call %d: no partition decided", i)
	}
	stalled := s.Phase == v1alpha1.RolloutAborted || s.Reason == v1alpha1.ReasonProgressDeadlineExceeded
	if d.Stalled != stalled {
		t.Errorf("call %d: Stalled = %v in phase %s (%s)", i, d.Stalled, s.Phase, s.Reason)
	}
	switch s.Phase {
	case v1alpha1.RolloutHealthy:
		if s.CurrentStepIndex != nil || s.CanaryRevision != "" || d.Partition.String() != "100%" {
			t.Errorf("call %d: Healthy but step %v, canary %q, partition %s", i, s.CurrentStepIndex, s.CanaryRevision, d.Partition.String())
		}
	case v1alpha1.RolloutAborted:
		if s.CurrentStepIndex != nil || d.Partition.String() != "100%" || s.CanaryRevision == "" {
			t.Errorf("call %d: Aborted but step %v, partition %s, canary %q", i, s.CurrentStepIndex, d.Partition.String(), s.CanaryRevision)
		}
	}
	if s.CurrentStepIndex != nil && in.Workload.UpdateRevision != "" {
		if want := in.Steps[*s.CurrentStepIndex].Partition; d.Partition != want {
			t.Errorf("call %d: at step %d the partition is %s, want %s", i, *s.CurrentStepIndex, d.Partition.String(), want.String())
		}
	}
	for _, q := range [][2]string{
		{in.Requests.Promote, s.Handled.Promote}, {in.Requests.PromoteFull, s.Handled.PromoteFull}, {in.Requests.Abort, s.Handled.Abort}, {in.Requests.Retry, s.Handled.Retry},
		{in.Requests.Pause, s.Handled.Pause}, {in.Requests.Resume, s.Handled.Resume},
	} {
		if q[0] != "" && q[0] != q[1] {
			t.Errorf("call %d: request %q not marked handled (%q)", i, q[0], q[1])
		}
	}
	if s.PromotedFull && s.CurrentStepIndex == nil {
		t.Errorf("call %d: promoted in full without a step in progress (phase %s)", i, s.Phase)
	}
	for _, e := range d.Events {
		if (e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning) || e.Reason == "" || e.Message == "" {
			t.Errorf("call %d: malformed event %+v", i, e)
		}
	}
}

func seq(parts ...[]call) []call {
	var out []call
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// startR2 commits r2 and reaches step 0's timed pause.
var startR2 = []call{
	{do: []action{commit("r2")}, want: want{phase: v1alpha1.RolloutProgressing, reason: v1alpha1.ReasonWaitingForPods, step: "0", partition: "90%", stable: "r1", canary: "r2", analysis: "Clear", requeue: "1s", events: []string{v1alpha1.EventRolloutStarted}}},
	{do: []action{converge()}, want: want{phase: v1alpha1.RolloutProgressing, reason: v1alpha1.ReasonStepPaused, step: "0", partition: "90%", requeue: "1m0s", events: []string{v1alpha1.EventStepReady}}},
}

// toAnalysis goes on from startR2 to step 1's analysis, running.
var toAnalysis = []call{
	{do: []action{tick(time.Minute)}, want: want{reason: v1alpha1.ReasonWaitingForPods, step: "1", partition: "50%", analysis: "Clear", events: []string{v1alpha1.EventStepAdvanced}}},
	{do: []action{converge()}, want: want{reason: v1alpha1.ReasonAnalysisRunning, step: "1", analysis: "Start", events: []string{v1alpha1.EventStepReady, v1alpha1.EventAnalysisStarted}}},
	{do: []action{verdict(VerdictRunning, "")}, want: want{reason: v1alpha1.ReasonAnalysisRunning, step: "1", analysis: "Run", requeue: "0s", events: []string{}}},
}

// abortOnFailure fails step 1's analysis.
var abortOnFailure = []call{
	{do: []action{verdict(VerdictFailed, "error-rate: 0.05 is above max 0.01")}, want: want{phase: v1alpha1.RolloutAborted, reason: v1alpha1.ReasonAnalysisFailed, step: "-", partition: "100%", canary: "r2", stable: "r1", analysis: "Keep", message: "error-rate: 0.05 is above max 0.01", events: []string{v1alpha1.EventRolloutAborted}}},
}
