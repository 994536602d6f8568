// Package step decides what a Rollout does next. Decide is pure: it takes
// the step plan, the Rollout's status, what the workload reports, the
// analysis verdict and the pending manual requests, all as plain values with
// an injected clock, and returns a Decision (the partition to apply, the new
// status, what the analysis runner should do, Events and when to look again).
// The reconciler gathers the Input and applies the Decision; nothing here
// reads the API or keeps state between calls, so a restarted controller takes
// the same decision from the same status.
//
// The cycle, as the design contract (shared/design/rollout.md) promises it:
//
//   - Idle: the partition is armed at "100%", so a new template moves no Pod.
//   - A workload update revision that differs from the stable revision starts
//     a rollout at step 0 and records it as the canary.
//   - Each step: the workload gate (observedGeneration current, the
//     partition applied, updatedReadyReplicas >= replicas - partition), then
//     the pause (timed, or until a promote request), then the analysis
//     (Passed: next step; Failed: abort; Inconclusive: the step's policy).
//   - After the last step the canary becomes stable, phase Healthy, re-armed.
//   - Abort: partition "100%", phase Aborted, until the template changes (back
//     to stable: Healthy; a new revision: a new rollout) or a retry request
//     starts the same canary again from step 0.
//   - A newer revision during a rollout restarts it from step 0.
//   - Fast path: a template back at the stable revision, or a semver
//     downgrade, sets partition 0 at once (no steps, no analysis) and turns
//     Healthy once every Pod is updated and ready.
//
// At most one step is taken per call.
package step
