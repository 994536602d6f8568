package rollout

import (
	"context"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// runBackground does what the step decision asks of
// status.backgroundAnalysis, as runAnalysis does for the step's: clear it,
// keep it, or run spec.analysis.background one round. Its run spans the
// steps from the one it started at: the canary Pods it measures are those
// of the step in progress, and the window it may read starts when its
// starting step's canary Pods were ready.
func (r *Reconciler) runBackground(ctx context.Context, rd *round, wl workload.Workload, obs workload.Observation) (time.Duration, error) {
	st := &rd.ro.Status
	switch rd.decision.Background {
	case step.AnalysisClear:
		st.BackgroundAnalysis = nil
		return 0, nil
	case step.AnalysisKeep:
		return 0, nil
	}
	if st.CurrentStepIndex == nil {
		return 0, nil
	}
	spec := rd.background
	if spec == nil {
		// The round that reached the starting step, which did not know
		// yet that it would measure.
		var err error
		if spec, err = r.resolveBackground(ctx, rd.ro); spec == nil || err != nil {
			return 0, err
		}
	}
	res, err := stepanalysis.Run(ctx, stepanalysis.Input{
		Now:           rd.now,
		Rollout:       rd.ro.Name,
		Spec:          *spec,
		Status:        st.BackgroundAnalysis,
		Start:         rd.decision.Background == step.AnalysisStart,
		StepIndex:     *st.CurrentStepIndex,
		Steps:         len(rd.ro.Spec.Steps),
		Revision:      st.CanaryRevision,
		StartedAt:     rd.now,
		CanaryReadyAt: canaryReadyAt(st),
		Replicas:      obs.Replicas,
		Background:    true,
	}, &measurer{r: r, ro: rd.ro, args: spec.LiteralArgs(), wl: wl, obs: obs, now: rd.now})
	if err != nil {
		return 0, err
	}
	st.BackgroundAnalysis = &res.Status
	// The schedule is told in a MeasurementScheduled Event; the status
	// message says what the steps wait for.
	res.Waiting = ""
	return r.recordRun(rd, res), nil
}

// resolveBackground returns spec.analysis.background with its templates
// and args resolved; nil when there is none. A missing template or arg, or
// a metric a background run cannot measure, is a stall naming it.
func (r *Reconciler) resolveBackground(ctx context.Context, ro *v1alpha1.Rollout) (*v1alpha1.AnalysisSpec, error) {
	spec, _, ok := ro.Spec.BackgroundAnalysis()
	if !ok {
		return nil, nil
	}
	if err := r.resolveAnalysis(ctx, ro, &spec, "spec.analysis.background"); err != nil {
		return nil, err
	}
	if err := stepanalysis.CheckBackground(spec.Metrics); err != nil {
		return nil, stall(v1alpha1.ReasonInvalidAnalysis, "%v", err)
	}
	return &spec, nil
}

// checkBackground resolves the background analysis before the step
// decision while a rollout is under way, so that one it cannot measure
// (a template or arg gone missing) holds the rollout where it is, Stalled,
// rather than letting it step on unwatched: never a pass.
func (r *Reconciler) checkBackground(ctx context.Context, rd *round, obs workload.Observation) error {
	st := &rd.ro.Status
	if st.CurrentStepIndex == nil || st.CanaryRevision == "" || st.CanaryRevision != obs.UpdateRevision || st.PromotedFull {
		return nil
	}
	spec, err := r.resolveBackground(ctx, rd.ro)
	rd.background = spec
	return err
}
