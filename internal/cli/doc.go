// Package cli is what kubectl-stepwise does, apart from its flags: it renders
// a Rollout for people and lists Rollouts, follows a Rollout and its
// workload with watches, writes manual-action annotations, changes a
// CloneSet's images and sets its template back to an earlier revision,
// turns a step list into a Rollout manifest, checks manifest files offline
// against the shipped CRDs, and finds the manager's version. The cobra
// commands in cmd/kubectl-stepwise only parse flags and call in here, so
// that everything below can be tested without a terminal.
package cli
