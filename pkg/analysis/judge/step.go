package judge

// Metric is one compared metric of a step, as the controller hands it
// over: its rule, how it counts, and one measurement's samples per side
// (see Samples).
type Metric struct {
	Name     string
	Compare  Compare
	Weight   int
	Critical bool
	DryRun   bool
	Canary   []float64
	Stable   []float64
}

// Step judges every compared metric of a step and scores them: the
// per-metric Results (in the order given, for status) and the Outcome.
// pass and marginal are the Rollout's judge thresholds.
func Step(metrics []Metric, pass, marginal int) ([]Result, Outcome) {
	results := make([]Result, len(metrics))
	scored := make([]Scored, len(metrics))
	for i, m := range metrics {
		results[i] = Judge(m.Canary, m.Stable, m.Compare)
		scored[i] = Scored{Name: m.Name, Verdict: results[i].Verdict, Weight: m.Weight, Critical: m.Critical, DryRun: m.DryRun}
	}
	return results, Decide(scored, pass, marginal)
}
