// Package gitops runs the real GitOps tools against Stepwise: Flux's
// source-controller and kustomize-controller, and Argo CD's application
// controller and repo server (built from the Go module proxy by
// hack/gitops-assets.sh into bin/), as processes against a kwok cluster
// with the Stepwise manager, Prometheus and a traffic simulator on
// 127.0.0.1. They pull from a git smart-HTTP server the test starts (git
// http-backend behind net/http/cgi), holding a repository the test commits
// to with the git CLI. The manifests are the repository's own:
// examples/rollout, examples/traffic, examples/flux and examples/argocd,
// loaded from their files; the test changes only what a team would (the image tag, the
// repository URL, and step and analysis times short enough for a test).
//
// Story 6 (traffic) adds the Gateway API CRDs and a stand-in Gateway
// controller that marks routes Accepted: kwok has no data plane, and no
// request is sent to any Pod.
//
// Each story logs its timeline (git commit, the tool's status, the
// Rollout's phase and step, Pods per image), which is what a user sees.
// Run with `make test-gitops`.
package gitops
