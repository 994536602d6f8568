package stepanalysis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

func TestShareOf(t *testing.T) {
	for workers, want := range map[int]int{1: 1, 3: 1, 4: 1, 8: 2, 16: 4, 17: 4, 64: 16} {
		if got := ShareOf(workers); got != want {
			t.Errorf("ShareOf(%d) = %d, want %d", workers, got, want)
		}
	}
}

// A namespace takes its share and no more, without waiting; other
// namespaces are not affected; a namespace's entry goes with its last
// round, and giving back twice counts once.
func TestSharesAreBoundedPerNamespaceAndForgotten(t *testing.T) {
	s := NewShares(8) // 2 each
	a1, refused := s.Take("a")
	a2, _ := s.Take("a")
	if a1 == nil || a2 == nil || refused != "" {
		t.Fatalf("the first two rounds of a were refused: %q", refused)
	}
	if done, refused := s.Take("a"); done != nil || !strings.Contains(refused, "namespace a already has 2 analysis rounds measuring, its share of the manager's 8 Rollout workers") {
		t.Fatalf("a third round of a: refused %q", refused)
	}
	b, refused := s.Take("b")
	if b == nil || refused != "" {
		t.Fatalf("b refused while a is at its share: %q", refused)
	}
	if s.Namespaces() != 2 || s.InFlight("a") != 2 {
		t.Fatalf("namespaces %d, a in flight %d", s.Namespaces(), s.InFlight("a"))
	}
	a1()
	a1()
	if s.InFlight("a") != 1 {
		t.Fatalf("a in flight %d after one release given twice, want 1", s.InFlight("a"))
	}
	if again, _ := s.Take("a"); again == nil {
		t.Fatal("a refused below its share")
	} else {
		again()
	}
	a2()
	b()
	if s.Namespaces() != 0 {
		t.Errorf("%d namespaces kept after every round ended", s.Namespaces())
	}
}

// refusingMeasurer refuses every round, and fails the test if it is asked
// to measure anyway.
type refusingMeasurer struct{ t *testing.T }

func (r refusingMeasurer) Vars(context.Context) (analysis.Vars, error) { return analysis.Vars{}, nil }
func (r refusingMeasurer) Job(context.Context, v1alpha1.Metric, JobRun) JobOutcome {
	r.t.Fatal("a refused round created a Job")
	return JobOutcome{}
}
func (r refusingMeasurer) Measure(context.Context, v1alpha1.Metric, string) analysis.Measurement {
	r.t.Error("measured a refused round")
	return analysis.Measurement{}
}
func (r refusingMeasurer) Compare(context.Context, v1alpha1.Metric, analysis.Vars, judge.Compare) (*judge.Result, analysis.Measurement) {
	r.t.Error("compared in a refused round")
	return nil, analysis.Measurement{}
}
func (r refusingMeasurer) Admit() (func(), string) { return nil, "namespace shop already has 4" }

// A refused round measures nothing, keeps the metrics due, says why in
// status.message and an Event, and looks again soon; the next admitted
// round measures them.
func TestRunDefersWhenItsNamespaceHasTakenItsShare(t *testing.T) {
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(time.Second) },
		metric("error-rate", `sum(rate(x[{{ .CanaryAge }}]))`), metric("latency", `max(y)`))
	in := input(s)
	in.Now = at(5)
	res, err := Run(context.Background(), in, refusingMeasurer{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Measurements) != 0 || res.Status.Phase != v1alpha1.AnalysisRunning {
		t.Fatalf("deferred round: %d measurements, phase %s", len(res.Measurements), res.Status.Phase)
	}
	if res.RequeueAfter != DeferRetry {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, DeferRetry)
	}
	want := "measurement deferred: namespace shop already has 4"
	if res.Waiting != want {
		t.Errorf("waiting %q, want %q", res.Waiting, want)
	}
	var deferredEvent bool
	for _, e := range res.Events {
		if e.Reason == v1alpha1.EventMeasurementDeferred {
			deferredEvent = true
			if e.Message != "step 1/3: metric error-rate, latency: "+want {
				t.Errorf("event %q", e.Message)
			}
		}
	}
	if !deferredEvent {
		t.Errorf("events %+v, want one %s", res.Events, v1alpha1.EventMeasurementDeferred)
	}

	f := &fakeMeasurer{answer: func(string, int) analysis.Measurement { return value(0) }}
	in.Status = &res.Status
	in.Now = at(7)
	next, err := Run(context.Background(), in, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Measurements) != 2 || next.Waiting != "" {
		t.Errorf("admitted round: %d measurements, waiting %q; want both metrics measured", len(next.Measurements), next.Waiting)
	}
}
