package rollout

import (
	"context"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
)

// A spanning analysis is not a step's: spec.analysis.background, measured
// from a step's gate until promotion, and spec.analysis.postPromotion,
// measured once every Pod runs the canary, for a window before it is made
// stable. Each has its tally in status and its Decision action, and both
// run through stepanalysis.Run as a step's analysis does.
type spanning struct {
	// of names it in messages and measurements (v1alpha1.MeasurementOf*).
	of string
	// field is its spec field, for stalls.
	field string
	// spec returns it with templates and defaults; false when unset.
	spec func(*v1alpha1.RolloutSpec) (v1alpha1.AnalysisSpec, bool)
	// tally is its status field.
	tally func(*v1alpha1.RolloutStatus) **v1alpha1.AnalysisStatus
	// action is what the decision asks of it.
	action func(*step.Decision) step.AnalysisAction
	// startedAt is when a run the decision starts began.
	startedAt func(rd *round) time.Time
	// due reports whether a rollout is where it measures, so that a
	// template it cannot read holds the rollout before the decision.
	due func(st *v1alpha1.RolloutStatus, steps int) bool
}

func backgroundSpanning() spanning {
	return spanning{
		of:    v1alpha1.MeasurementOfBackground,
		field: "spec.analysis.background",
		spec: func(s *v1alpha1.RolloutSpec) (v1alpha1.AnalysisSpec, bool) {
			a, _, ok := s.BackgroundAnalysis()
			return a, ok
		},
		tally:     func(st *v1alpha1.RolloutStatus) **v1alpha1.AnalysisStatus { return &st.BackgroundAnalysis },
		action:    func(d *step.Decision) step.AnalysisAction { return d.Background },
		startedAt: func(rd *round) time.Time { return rd.now },
		due:       func(*v1alpha1.RolloutStatus, int) bool { return true },
	}
}

func postPromotionSpanning() spanning {
	return spanning{
		of:    v1alpha1.MeasurementOfPostPromotion,
		field: "spec.analysis.postPromotion",
		spec: func(s *v1alpha1.RolloutSpec) (v1alpha1.AnalysisSpec, bool) {
			a, _, ok := s.PostPromotionAnalysis()
			return a, ok
		},
		tally:     func(st *v1alpha1.RolloutStatus) **v1alpha1.AnalysisStatus { return &st.PostPromotionAnalysis },
		action:    func(d *step.Decision) step.AnalysisAction { return d.PostPromotion },
		startedAt: func(rd *round) time.Time { return rd.decision.Status.PostPromotionStartedAt },
		// At the last step: the window starts there.
		due: func(st *v1alpha1.RolloutStatus, steps int) bool { return int(*st.CurrentStepIndex) >= steps-1 },
	}
}

// spannings are the spanning analyses, in the order each round runs them.
func spannings() []spanning { return []spanning{backgroundSpanning(), postPromotionSpanning()} }

// runSpanning does what the step decision asks of a spanning analysis'
// tally, as runAnalysis does for the step's: clear it, keep it, or run it
// one round. The canary Pods it measures are those of the step in
// progress, and the window it may read starts when that step's canary
// Pods were ready at the start of the run.
func (r *Reconciler) runSpanning(ctx context.Context, rd *round, sp spanning) (time.Duration, error) {
	wl, obs := rd.wl, rd.obs
	st := &rd.ro.Status
	tally := sp.tally(st)
	switch sp.action(rd.decision) {
	case step.AnalysisClear:
		*tally = nil
		return 0, nil
	case step.AnalysisKeep:
		return 0, nil
	}
	if st.CurrentStepIndex == nil {
		return 0, nil
	}
	spec := rd.spanning[sp.of]
	if spec == nil {
		// The round that reached where it starts, which did not know yet
		// that it would measure.
		var err error
		if spec, err = r.resolveSpanning(ctx, rd.ro, sp); spec == nil || err != nil {
			return 0, err
		}
	}
	res, err := stepanalysis.Run(ctx, stepanalysis.Input{
		Now:           rd.now,
		Rollout:       rd.ro.Name,
		Spec:          *spec,
		Status:        *tally,
		Start:         sp.action(rd.decision) == step.AnalysisStart,
		StepIndex:     *st.CurrentStepIndex,
		Steps:         len(rd.ro.Spec.Steps),
		Revision:      st.CanaryRevision,
		StartedAt:     sp.startedAt(rd),
		CanaryReadyAt: canaryReadyAt(st),
		Replicas:      obs.Replicas,
		Of:            sp.of,
	}, &measurer{r: r, ro: rd.ro, args: spec.LiteralArgs(), wl: wl, obs: obs, now: rd.now})
	if err != nil {
		return 0, err
	}
	*tally = &res.Status
	// The schedule is told in a MeasurementScheduled Event; the status
	// message says what the rollout waits for.
	res.Waiting = ""
	return r.recordRun(rd, res), nil
}

// resolveSpanning returns a spanning analysis with its templates and args
// resolved; nil when it is not set. A missing template or arg, or a metric
// it cannot measure, is a stall naming it.
func (r *Reconciler) resolveSpanning(ctx context.Context, ro *v1alpha1.Rollout, sp spanning) (*v1alpha1.AnalysisSpec, error) {
	spec, ok := sp.spec(&ro.Spec)
	if !ok {
		return nil, nil
	}
	if err := r.resolveAnalysis(ctx, ro, &spec, sp.field); err != nil {
		return nil, err
	}
	if err := stepanalysis.CheckSpanning(sp.field, spec.Metrics); err != nil {
		return nil, stall(v1alpha1.ReasonInvalidAnalysis, "%v", err)
	}
	return &spec, nil
}

// checkSpanning resolves the spanning analyses before the step decision
// while a rollout is where they measure, so that one it cannot measure (a
// template or arg gone missing) holds the rollout where it is, Stalled,
// rather than letting it step on, or be made stable, unwatched: never a
// pass.
func (r *Reconciler) checkSpanning(ctx context.Context, rd *round) error {
	obs := rd.obs
	st := &rd.ro.Status
	if st.CurrentStepIndex == nil || st.CanaryRevision == "" || st.CanaryRevision != obs.UpdateRevision || st.PromotedFull {
		return nil
	}
	for _, sp := range spannings() {
		if !sp.due(st, len(rd.ro.Spec.Steps)) {
			continue
		}
		spec, err := r.resolveSpanning(ctx, rd.ro, sp)
		if err != nil {
			return err
		}
		if spec != nil {
			if rd.spanning == nil {
				rd.spanning = map[string]*v1alpha1.AnalysisSpec{}
			}
			rd.spanning[sp.of] = spec
		}
	}
	return nil
}
