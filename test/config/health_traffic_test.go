package config_test

import (
	"testing"

	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/argocdhealth"
)

// trafficRolloutMeta is the Rollout of the walkthrough in docs/gitops.md
// (kubectl stepwise plan --pause manual --traffic 0%,20%,100% --match ...):
// testers only at step 1, 20% of requests at step 2, everything at step 3.
const trafficRolloutMeta = `
metadata: {name: web, namespace: shop, generation: 3, finalizers: [stepwise.dev/traffic]}
spec:
  workloadRef: {apiVersion: stepwise.dev/v1alpha1, kind: CloneSet, name: web}
  trafficRouting:
    stableService: web
    canaryService: {name: web-canary, create: true}
    httpRoutes: [{name: web, ruleName: app}]
  steps:
  - {partition: 90%, traffic: 0, matches: [{header: {name: x-canary, value: always}}], pause: {}}
  - {partition: 50%, traffic: 20, pause: {}}
  - {partition: 0, traffic: 100}`

// TestRolloutHealthWithTraffic: what Argo CD (the shipped Lua) and Flux
// (kstatus) show for a Rollout with traffic routing, on the statuses the
// controller writes in those states (messages as controllers/rollout/step
// and rollout_traffic.go format them; conditions as setConditions and
// setTrafficConflict set them):
//   - a step whose Pods are ready while its route is not accepted yet is
//     in progress, not healthy, and says it waits for the routes;
//   - a route never accepted aborts at the progress deadline: Degraded and
//     Failed, with the reason;
//   - a TrafficConflict (git re-applying the weights, or the stable
//     Service) neither hides the step's own state nor turns it into a
//     failure: the controller applies its own again and the rollout goes
//     on;
//   - after promotion, with the route and Services back to git's form
//     (weight 0, no matches, no revision key), Healthy and Current.
func TestRolloutHealthWithTraffic(t *testing.T) {
	const waiting = "step 1/3 (partition 90%): Pods ready, waiting for the routes to carry the step's traffic"
	const aborted = "revision web-8c4b aborted at step 1/3: no progress for 10m0s: " + waiting
	const conflictArgo = `HTTPRoute shop/web: spec.rules (weight 0, Stepwise set 20) by argocd-controller: another field manager changed what the Rollout sets (field manager \"stepwise-traffic\") during a release, and the Rollout set it again; at rest the Services and routes are git's, so let git re-apply them between releases, or accept that each apply during a release is followed by the Rollout's (docs/gitops.md#trafficconflict)`
	const conflictFlux = `Service shop/web: spec.selector (without stepwise.dev/revision-hash, Stepwise set stepwise.dev/revision-hash=7d9f) by kustomize-controller: another field manager changed what the Rollout sets (field manager \"stepwise-traffic\") during a release, and the Rollout set it again; at rest the Services and routes are git's, so let git re-apply them between releases, or accept that each apply during a release is followed by the Rollout's (docs/gitops.md#trafficconflict)`
	const promote = "step 2/3 (partition 50%): waiting for a promote request"
	const step3 = "step 3/3 (partition 0): 2/4 updated Pods ready"
	const stable = "revision web-8c4b is stable; partition armed at 100%"
	runHealthCases[stepwisev1.Rollout](t, "Rollout", "rollout-health.lua", []healthCase{{
		name: "step's Pods ready, route not accepted yet",
		obj: trafficRolloutMeta + `
status:
  observedGeneration: 3
  phase: Progressing
  reason: WaitingForTraffic
  message: "` + waiting + `"
  currentStepIndex: 0
  stableRevision: web-7d9f
  canaryRevision: web-8c4b
  traffic: {matches: 1, stableRevision: web-7d9f, canaryRevision: web-8c4b}
  conditions:
  - {type: Ready, status: "False", reason: WaitingForTraffic, message: "` + waiting + `"}
  - {type: Reconciling, status: "True", reason: WaitingForTraffic, message: "` + waiting + `"}`,
		status:  argocdhealth.Progressing,
		message: "waiting for the routes to carry the step's traffic",
		kstatus: kstatus.InProgressStatus, kstatusMessage: "waiting for the routes to carry the step's traffic",
	}, {
		name: "route never accepted: aborted at the progress deadline",
		obj: trafficRolloutMeta + `
status:
  observedGeneration: 3
  phase: Aborted
  reason: ProgressDeadlineExceeded
  message: "` + aborted + `"
  stableRevision: web-7d9f
  canaryRevision: web-8c4b
  traffic: {stableRevision: web-7d9f, canaryRevision: web-8c4b}
  conditions:
  - {type: Ready, status: "False", reason: ProgressDeadlineExceeded, message: "` + aborted + `"}
  - {type: Stalled, status: "True", reason: ProgressDeadlineExceeded, message: "` + aborted + `"}`,
		status:  argocdhealth.Degraded,
		message: "no progress for 10m0s",
		kstatus: kstatus.FailedStatus, kstatusMessage: "no progress for 10m0s",
	}, {
		name: "TrafficConflict with Argo CD at a step awaiting promotion",
		obj: trafficRolloutMeta + `
status:
  observedGeneration: 3
  phase: Paused
  reason: AwaitingPromotion
  message: "` + promote + `"
  currentStepIndex: 1
  stableRevision: web-7d9f
  canaryRevision: web-8c4b
  traffic: {canaryWeight: 20, accepted: true, step: 1, stableRevision: web-7d9f, canaryRevision: web-8c4b}
  conditions:
  - {type: Ready, status: "False", reason: AwaitingPromotion, message: "` + promote + `"}
  - {type: Reconciling, status: "True", reason: AwaitingPromotion, message: "` + promote + `"}
  - {type: TrafficConflict, status: "True", reason: FieldManagerConflict, message: "` + conflictArgo + `"}`,
		status:  argocdhealth.Suspended,
		message: "waiting for a promote request",
		kstatus: kstatus.InProgressStatus, kstatusMessage: "waiting for a promote request",
	}, {
		name: "TrafficConflict with Flux while the last step's Pods move",
		obj: trafficRolloutMeta + `
status:
  observedGeneration: 3
  phase: Progressing
  reason: WaitingForPods
  message: "` + step3 + `"
  currentStepIndex: 2
  stableRevision: web-7d9f
  canaryRevision: web-8c4b
  traffic: {canaryWeight: 20, accepted: true, stableRevision: web-7d9f, canaryRevision: web-8c4b}
  conditions:
  - {type: Ready, status: "False", reason: WaitingForPods, message: "` + step3 + `"}
  - {type: Reconciling, status: "True", reason: WaitingForPods, message: "` + step3 + `"}
  - {type: TrafficConflict, status: "True", reason: FieldManagerConflict, message: "` + conflictFlux + `"}`,
		status:  argocdhealth.Progressing,
		message: "2/4 updated Pods ready",
		kstatus: kstatus.InProgressStatus, kstatusMessage: "2/4 updated Pods ready",
	}, {
		name: "promoted: route and Services back to git's form",
		obj: trafficRolloutMeta + `
status:
  observedGeneration: 3
  phase: Healthy
  reason: Stable
  message: "` + stable + `"
  stableRevision: web-8c4b
  traffic: {accepted: true}
  conditions:
  - {type: Ready, status: "True", reason: Stable, message: "` + stable + `"}`,
		status:  argocdhealth.Healthy,
		message: "revision web-8c4b is stable",
		kstatus: kstatus.CurrentStatus, kstatusMessage: "Resource is Ready",
	}})
}
