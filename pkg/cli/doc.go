// Package cli is what kubectl-stepwise does, apart from its flags: it renders
// a Rollout for people, follows a Rollout and its workload with watches,
// writes manual-action annotations and turns a step list into a Rollout
// manifest. The cobra commands in cmd/kubectl-stepwise only parse flags and
// call in here, so that everything below can be tested without a terminal.
package cli
