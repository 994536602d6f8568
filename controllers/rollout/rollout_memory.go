package rollout

import "github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"

// memory is all the Rollout controller keeps between rounds besides the
// informer caches and its metrics. A Rollout's step, analysis tallies,
// handled requests and notification record live in its status, so a
// restarted controller, or a new leader, resumes the same step without
// redoing an analysis that passed. What is here only saves work or bounds
// what is in flight; a restart starts with all of it empty, and each item
// says what that costs.
//
// Two more things are in flight, not remembered, and go with the process:
// the Notifier's queued webhook deliveries (at most once by design, also
// across restarts: docs/notifications.md) and the bytes of Prometheus
// answers being read (AnalysisBudget).
type memory struct {
	// writes is the resourceVersion this process's last write of each
	// Rollout produced, so a round reads the cache when it holds that write
	// (readRollout). Lost: the first round of each Rollout reads around
	// the cache once.
	writes ownWrites
	// validations is each Rollout generation's stepanalysis.Validate
	// verdict, so its queries are rendered once, not every round. Lost:
	// validated again, the same verdict.
	validations stepanalysis.Validations
	// shares counts the analysis rounds measuring in each namespace, so one
	// namespace takes at most its share of the workers. Set by
	// SetupWithManager; unbounded when unset. Lost: nothing is measuring in
	// a new process.
	shares *stepanalysis.Shares
	// deletedCanaries are the canary Pods a rollback deleted that the Pod
	// cache does not show deleted yet, so a round that starts before it
	// does neither deletes them again nor counts them available. Lost: a
	// new process's cache is listed after the deletions, and shows them.
	deletedCanaries deletedCanaries
}
