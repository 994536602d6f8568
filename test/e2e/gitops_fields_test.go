package e2e

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func gitopsHasStatus(u *unstructured.Unstructured) bool {
	_, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return found
}

func gitopsObserved(u *unstructured.Unstructured) bool {
	obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return obs == u.GetGeneration()
}

func gitopsString(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func gitopsInt(u *unstructured.Unstructured, fields ...string) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, fields...)
	return n
}

// gitopsIntOrString reads an int-or-string field as its text; "" when unset.
func gitopsIntOrString(u *unstructured.Unstructured, fields ...string) string {
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if !found || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// gitopsCondition returns a condition's status, reason and message.
func gitopsCondition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return status, reason, message
		}
	}
	return "", "", ""
}

func gitopsWantRollout(u *unstructured.Unstructured) string {
	if !gitopsObserved(u) {
		return gitopsInProgress
	}
	switch stepwisev1.RolloutPhase(gitopsString(u, "status", "phase")) {
	case stepwisev1.RolloutHealthy:
		if ready, _, _ := gitopsCondition(u, meta.ReadyCondition); ready == string(metav1.ConditionTrue) {
			return gitopsCurrent
		}
		return gitopsInProgress
	case stepwisev1.RolloutPaused:
		return gitopsSuspended
	case stepwisev1.RolloutAborted:
		return gitopsFailed
	}
	return gitopsInProgress
}

// gitopsWantCloneSet is InProgress/Progressing while the update revision
// waits for the Rollout, or the status shows Pods that are not where the
// applied partition puts them; "" otherwise, as Pods being updated in
// place are not all visible in the status.
func gitopsWantCloneSet(u *unstructured.Unstructured) string {
	if !gitopsObserved(u) || !gitopsAcknowledged(u) {
		return gitopsInProgress
	}
	desired, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		desired = 1
	}
	st := func(f string) int64 { return gitopsInt(u, "status", f) }
	expected := st("expectedUpdatedReplicas")
	complete := gitopsString(u, "status", "currentRevision") == gitopsString(u, "status", "updateRevision")
	if st("replicas") != desired || st("readyReplicas") != desired || st("updatedReadyReplicas") < expected ||
		(st("updatedReplicas") > expected && !complete) {
		return gitopsInProgress
	}
	return ""
}

// gitopsAcknowledged reports whether the Rollout governing the CloneSet
// acknowledged its update revision (status.rollout.revision), as far as
// the CloneSet's status tells; true when no Rollout governs it.
func gitopsAcknowledged(u *unstructured.Unstructured) bool {
	if _, governed, _ := unstructured.NestedMap(u.Object, "status", "rollout"); !governed {
		return true
	}
	return gitopsString(u, "status", "rollout", "revision") == gitopsString(u, "status", "updateRevision")
}

// gitopsAppliedPartition is the partition the CloneSet applies: its
// Rollout's (status.rollout.partition) while one governs it, else the
// spec's; "" when unset.
func gitopsAppliedPartition(u *unstructured.Unstructured) string {
	if _, governed, _ := unstructured.NestedMap(u.Object, "status", "rollout"); governed {
		return gitopsIntOrString(u, "status", "rollout", "partition")
	}
	return gitopsPartition(u)
}

// gitopsGovernor is status.rollout as "<revision>/<partition>"; "" when no
// Rollout governs.
func gitopsGovernor(u *unstructured.Unstructured) string {
	if _, governed, _ := unstructured.NestedMap(u.Object, "status", "rollout"); !governed {
		return ""
	}
	return gitopsString(u, "status", "rollout", "revision") + "/" + gitopsIntOrString(u, "status", "rollout", "partition")
}

// gitopsGrant is a Rollout's status.partitionGrant as
// "<revision>/<partition>"; "" when it has none.
func gitopsGrant(u *unstructured.Unstructured) string {
	if _, found, _ := unstructured.NestedMap(u.Object, "status", "partitionGrant"); !found {
		return ""
	}
	return gitopsString(u, "status", "partitionGrant", "revision") + "/" + gitopsIntOrString(u, "status", "partitionGrant", "partition")
}

// gitopsHeldIdle reports a CloneSet holding every Pod on the current
// revision while its update revision is acknowledged (Rollout paused,
// or aborted), every Pod ready, and a status that says so.
func gitopsHeldIdle(u *unstructured.Unstructured) bool {
	return gitopsObserved(u) && gitopsAcknowledged(u) && gitopsAppliedPartition(u) == "100%" &&
		gitopsString(u, "status", "updateRevision") != gitopsString(u, "status", "currentRevision") &&
		gitopsInt(u, "status", "updatedReplicas") == 0 && gitopsInt(u, "status", "readyReplicas") == gitopsReplicas &&
		// Counts of the update revision that fell to 0 must say so.
		gitopsInt(u, "status", "expectedUpdatedReplicas") == 0 && gitopsInt(u, "status", "updatedAvailableReplicas") == 0
}

// gitopsPartition is spec.updateStrategy.partition as git left it; "" when unset.
func gitopsPartition(u *unstructured.Unstructured) string {
	return gitopsIntOrString(u, "spec", "updateStrategy", "partition")
}

// gitopsOwners returns the managers whose entries in managedFields (the
// status subresource's left out) hold the field at path, sorted.
func gitopsOwners(u *unstructured.Unstructured, path ...string) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &node); err != nil {
			continue
		}
		held := true
		for _, f := range path {
			child, ok := node["f:"+f].(map[string]any)
			if !ok {
				held = false
				break
			}
			node = child
		}
		if held && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}

func gitopsPartitionOwners(u *unstructured.Unstructured) []string {
	return gitopsOwners(u, "spec", "updateStrategy", "partition")
}
