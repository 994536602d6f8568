// Package traffic shifts requests between a Rollout's stable and canary
// revisions through Gateway API HTTPRoutes (docs/traffic.md).
//
// Decide is pure: from the step, the ready Pods and the abort state it
// returns the weights, matches and Service selectors the routes must carry.
// Rules and CanaryRoute are pure too: from the live route they compute what
// Stepwise applies, touching nothing else of the user's route. Applier
// writes them with server-side apply under its own field manager
// (FieldManager) and reports the other managers that fight over them.
package traffic
