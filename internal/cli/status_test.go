package cli

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestJudge(t *testing.T) {
	healthy := func() Snapshot {
		r := newTestRollout()
		r.Status.Phase = stepwisev1.RolloutHealthy
		r.Status.StableRevision = "web-7c9d8"
		w := newTestWorkload(10, 10, "100%")
		return Snapshot{Rollout: r, Workload: w}
	}
	cases := []struct {
		name    string
		edit    func(*Snapshot)
		outcome Outcome
		summary string
	}{
		{"healthy", func(*Snapshot) {}, Done, "Healthy, stable revision web-7c9d8"},
		{"healthy without a readable workload", func(s *Snapshot) { s.Workload, s.WorkloadErr = nil, errors.New("forbidden") },
			Done, "Healthy"},
		{"stale generation", func(s *Snapshot) { s.Rollout.Generation = 3 },
			Waiting, "waiting for the controller to observe generation 3 (status is for 2)"},
		{"workload generation not observed", func(s *Snapshot) { s.Workload.Generation = 6 },
			Waiting, "waiting for CloneSet web to observe generation 6 (observed 5)"},
		{"healthy for the previous revision", func(s *Snapshot) { s.Workload.UpdateRevision = "web-new" },
			Waiting, "waiting for the controller to pick up revision web-new (stable is web-7c9d8)"},
		{"aborted", func(s *Snapshot) {
			s.Rollout.Status.Phase = stepwisev1.RolloutAborted
			s.Rollout.Status.Reason = stepwisev1.ReasonAnalysisFailed
			s.Rollout.Status.Message = "error-rate 0.2 is above 0.01"
			s.Rollout.Status.CanaryRevision = "web-7c9d8"
		}, Failed, "Aborted (AnalysisFailed): error-rate 0.2 is above 0.01"},
		{"aborted an older revision", func(s *Snapshot) {
			s.Rollout.Status.Phase = stepwisev1.RolloutAborted
			s.Rollout.Status.CanaryRevision = "web-old"
		}, Waiting, "waiting for the controller to pick up revision web-7c9d8 (aborted web-old)"},
		{"progressing", func(s *Snapshot) {
			s.Rollout.Status.Phase = stepwisev1.RolloutProgressing
			s.Rollout.Status.CurrentStepIndex = new(int32(1))
			s.Rollout.Status.Reason = stepwisev1.ReasonWaitingForPods
			s.Rollout.Status.Message = "3/5 ready"
		}, Waiting, "Progressing, step 2/3 (partition 50%), WaitingForPods: 3/5 ready"},
		{"no phase yet", func(s *Snapshot) { s.Rollout.Status.Phase = "" },
			Waiting, "waiting for the controller to report a phase"},
		{"deleted", func(s *Snapshot) { s.Rollout = nil }, Deleted, "the rollout was deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := healthy()
			c.edit(&s)
			v := Judge(s)
			if v.Outcome != c.outcome || !strings.HasPrefix(v.Summary, c.summary) {
				t.Errorf("Judge = %v %q, want %v %q", v.Outcome, v.Summary, c.outcome, c.summary)
			}
		})
	}
}

// TestJudgeProgressLines checks what status prints: a line per phase, step
// or reason, not per message.
func TestJudgeProgressLines(t *testing.T) {
	r := newTestRollout()
	r.Status.Phase = stepwisev1.RolloutProgressing
	r.Status.CurrentStepIndex = new(int32(0))
	r.Status.Reason = stepwisev1.ReasonAnalysisRunning
	r.Status.Message = "1/5 measurements"
	a := Judge(Snapshot{Rollout: r})
	r.Status.Message = "2/5 measurements"
	b := Judge(Snapshot{Rollout: r})
	r.Status.CurrentStepIndex = new(int32(1))
	c := Judge(Snapshot{Rollout: r})
	if a.key != b.key {
		t.Error("a new message alone makes a new progress line")
	}
	if b.key == c.key {
		t.Error("a new step makes no new progress line")
	}
}

func TestWorkloadFromUnstructured(t *testing.T) {
	cloneSet := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1", "kind": "CloneSet",
		"metadata": map[string]any{"name": "web", "generation": int64(4), "resourceVersion": "9"},
		"spec":     map[string]any{"replicas": int64(10), "updateStrategy": map[string]any{"partition": "50%"}},
		"status": map[string]any{"observedGeneration": int64(4), "updatedReplicas": int64(5), "updatedReadyReplicas": int64(4),
			"readyReplicas": int64(9), "updateRevision": "web-2", "currentRevision": "web-1"},
	}}
	w, err := WorkloadFromUnstructured(cloneSet)
	if err != nil {
		t.Fatal(err)
	}
	if w.Replicas != 10 || w.Partition.String() != "50%" || *w.UpdatedReadyReplicas != 4 || !w.GenerationObserved() ||
		w.UpdateRevision != "web-2" || w.ResourceVersion != "9" {
		t.Errorf("CloneSet read as %+v", w)
	}

	governed := cloneSet.DeepCopy()
	governed.Object["spec"].(map[string]any)["updateStrategy"] = map[string]any{"partition": int64(0)}
	governed.Object["status"].(map[string]any)["rollout"] = map[string]any{"name": "web", "revision": "web-2", "partition": "50%"}
	if w, err := WorkloadFromUnstructured(governed); err != nil || w.Partition.String() != "50%" {
		t.Errorf("a governed CloneSet read with partition %v (%v), want the 50%% it applies, not git's 0", w.Partition, err)
	}

	statefulSet := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "db", "generation": int64(2)},
		"spec":     map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"partition": int64(2)}}},
		"status":   map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(1)},
	}}
	w, err = WorkloadFromUnstructured(statefulSet)
	if err != nil {
		t.Fatal(err)
	}
	if w.Replicas != 1 || w.Partition.String() != "2" || w.UpdatedReadyReplicas != nil || w.GenerationObserved() {
		t.Errorf("StatefulSet read as %+v", w)
	}

	bad := cloneSet.DeepCopy()
	bad.Object["spec"].(map[string]any)["replicas"] = "ten"
	if _, err := WorkloadFromUnstructured(bad); err == nil {
		t.Error("a string replicas was accepted")
	}
}

func TestStepTarget(t *testing.T) {
	cases := []struct {
		replicas          int32
		partition         intstr.IntOrString
		wantTarget, wantK int32
	}{
		{10, intstr.FromString("90%"), 1, 9},
		{10, intstr.FromString("50%"), 5, 5},
		{3, intstr.FromString("50%"), 1, 2}, // percents round up: 1.5 kept is 2
		{10, intstr.FromString("95%"), 0, 10},
		{10, intstr.FromInt32(0), 10, 0},
		{10, intstr.FromInt32(15), 0, 10}, // more than replicas keeps them all
	}
	for _, c := range cases {
		target, kept, err := StepTarget(c.replicas, c.partition)
		if err != nil || target != c.wantTarget || kept != c.wantK {
			t.Errorf("StepTarget(%d, %s) = %d, %d, %v; want %d, %d", c.replicas, c.partition.String(), target, kept, err, c.wantTarget, c.wantK)
		}
	}
}

func TestWorkloadResource(t *testing.T) {
	for _, ref := range []stepwisev1.WorkloadReference{
		{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet"},
		{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet"},
		{APIVersion: "apps/v1", Kind: "StatefulSet"},
	} {
		if _, err := WorkloadResource(ref); err != nil {
			t.Error(err)
		}
	}
	if _, err := WorkloadResource(stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment"}); err == nil {
		t.Error("Deployment accepted")
	}
}

func TestRequestToken(t *testing.T) {
	if got := RequestToken(testNow.Add(123456789)); got != "2026-11-29T12:00:00.123456789Z" {
		t.Errorf("RequestToken = %q", got)
	}
	actions := map[string]string{}
	for _, a := range Actions() {
		actions[a.Name] = a.Annotation
	}
	if len(actions) != 5 || actions["promote"] != stepwisev1.PromoteAtAnnotation || actions["resume"] != stepwisev1.ResumeAtAnnotation {
		t.Errorf("actions: %v", actions)
	}
}
