package config_test

import (
	"testing"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/argocdhealth"
)

func TestCloneSetHealth(t *testing.T) {
	runHealthCases[stepwisev1.CloneSet](t, "CloneSet", "cloneset-health.lua", []healthCase{{
		name: "no status yet",
		obj: `
metadata: {name: web, generation: 1}
spec: {replicas: 4, template: {}}`,
		status:  argocdhealth.Progressing,
		message: "waiting for the CloneSet controller",
	}, {
		name: "spec change not observed yet",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 1, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 4, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Progressing,
		message: "waiting for CloneSet spec update to be observed",
	}, {
		name: "stalled: template change impossible in place",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}, updateStrategy: {type: InPlaceOnly}}
status:
  observedGeneration: 2
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 0
  updatedReadyReplicas: 0
  expectedUpdatedReplicas: 4
  conditions:
  - {type: Stalled, status: "True", reason: InPlaceImpossible, message: "InPlaceOnly: spec.containers[0].ports changed"}
  - {type: Ready, status: "False", reason: InPlaceImpossible, message: "InPlaceOnly: spec.containers[0].ports changed"}`,
		status:  argocdhealth.Degraded,
		message: "ports changed",
	}, {
		name: "reconciling: updating in place",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status:
  observedGeneration: 2
  replicas: 4
  readyReplicas: 3
  updatedReplicas: 2
  updatedReadyReplicas: 1
  expectedUpdatedReplicas: 4
  conditions:
  - {type: Reconciling, status: "True", reason: Updating, message: "4/4 Pods, 2 updated, 1 updated and ready"}`,
		status:  argocdhealth.Progressing,
		message: "2 updated, 1 updated and ready",
	}, {
		name: "update paused half way",
		obj: `
metadata: {name: web, generation: 3}
spec: {replicas: 4, template: {}, updateStrategy: {paused: true}}
status: {observedGeneration: 3, replicas: 4, readyReplicas: 4, updatedReplicas: 1, updatedReadyReplicas: 1, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Suspended,
		message: "1 of 4 Pods updated",
	}, {
		name: "paused after the update completed",
		obj: `
metadata: {name: web, generation: 3}
spec: {replicas: 4, template: {}, updateStrategy: {paused: true}}
status: {observedGeneration: 3, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 4, expectedUpdatedReplicas: 4}`,
		status: argocdhealth.Healthy,
	}, {
		name: "new revision awaiting its Rollout: git's partition 0 ignored",
		obj: `
metadata: {name: web, generation: 7}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 0}}
status:
  observedGeneration: 7
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 0
  updatedReadyReplicas: 0
  expectedUpdatedReplicas: 0
  currentRevision: web-2
  updateRevision: web-3
  rollout: {name: web, revision: web-2, partition: 100%}
  conditions:
  - {type: Reconciling, status: "True", reason: AwaitingRollout, message: "revision web-3 waits for Rollout web to acknowledge it: no Pod moves to it before"}
  - {type: Ready, status: "False", reason: AwaitingRollout, message: "revision web-3 waits for Rollout web to acknowledge it: no Pod moves to it before"}
  - {type: Governed, status: "True", reason: GovernedByRollout, message: "Rollout web decides how far Pods move; spec.updateStrategy.partition (0) is ignored"}`,
		status:  argocdhealth.Progressing,
		message: "waits for Rollout web",
	}, {
		name: "at a Rollout's step: git's partition 0 ignored",
		obj: `
metadata: {name: web, generation: 7}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 0}}
status:
  observedGeneration: 7
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 2
  updatedReadyReplicas: 2
  expectedUpdatedReplicas: 2
  currentRevision: web-2
  updateRevision: web-3
  rollout: {name: web, revision: web-3, partition: 50%}
  conditions:
  - {type: Ready, status: "True", reason: Partitioned, message: "2/4 Pods on revision web-3, partition keeps 2 on web-2"}
  - {type: Governed, status: "True", reason: GovernedByRollout, message: "Rollout web decides how far Pods move: partition 50% for revision web-3; spec.updateStrategy.partition (0) is ignored"}`,
		status:  argocdhealth.Healthy,
		message: "partition keeps 2",
	}, {
		name: "held at 100% partition by a Rollout",
		obj: `
metadata: {name: web, generation: 5}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 100%}}
status: {observedGeneration: 5, replicas: 4, readyReplicas: 4, updatedReplicas: 0, updatedReadyReplicas: 0}`,
		status: argocdhealth.Healthy,
	}, {
		name: "canary step reached",
		obj: `
metadata: {name: web, generation: 6}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 50%}}
status:
  observedGeneration: 6
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 2
  updatedReadyReplicas: 2
  expectedUpdatedReplicas: 2
  conditions: [{type: Ready, status: "True", reason: Partitioned, message: "2/4 Pods on revision web-2, partition keeps 2 on web-1"}]`,
		status:  argocdhealth.Healthy,
		message: "partition keeps 2",
	}, {
		name: "fully updated",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 4, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Healthy,
		message: "4/4 Pods ready",
	}, {
		name: "a Pod became unready",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 3, updatedReplicas: 4, updatedReadyReplicas: 3, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Progressing,
		message: "3/4 Pods ready",
	}, {
		name: "updated Pods not ready yet",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 2, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Progressing,
		message: "2 of 4 updated Pods ready",
	}, {
		name: "replicas unset counts as 1",
		obj: `
metadata: {name: web, generation: 1}
spec: {template: {}}
status: {observedGeneration: 1, replicas: 1, readyReplicas: 1}`,
		status: argocdhealth.Healthy,
	}, {
		name: "replicas unset, Pod not ready",
		obj: `
metadata: {name: web, generation: 1}
spec: {template: {}}
status: {observedGeneration: 1, replicas: 1, readyReplicas: 0}`,
		status: argocdhealth.Progressing,
	}, {
		name: "scaled to zero",
		obj: `
metadata: {name: web, generation: 7}
spec: {replicas: 0, template: {}}
status: {observedGeneration: 7, replicas: 0, readyReplicas: 0}`,
		status: argocdhealth.Healthy,
	}})
}
