package cli

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// UndoResult says what undo did.
type UndoResult struct {
	// CloneSet is the workload whose template was set back.
	CloneSet string
	// Revision is the revision the template was set back to.
	Revision string
	// Stable: Revision is the Rollout's stable revision, and the Rollout
	// takes its rollback fast path (every Pod back at once, no steps, no
	// analysis). Otherwise Revision is the stable revision before it,
	// which the Rollout rolls out like any new revision, unless
	// spec.versionPolicy sees a downgrade to a revision that was stable.
	Stable bool
	// Replaced is the stable revision that Revision was stable before.
	Replaced string
}

// UndoTarget picks the revision undo goes back to: the stable revision
// while the workload's template is another one (a rollout in progress, or
// aborted), else the stable revision before it.
func UndoTarget(st *stepwisev1.RolloutStatus, updateRevision string) (revision string, stable bool, err error) {
	switch {
	case st.StableRevision == "":
		return "", false, fmt.Errorf("it has no stable revision yet")
	case updateRevision != st.StableRevision:
		return st.StableRevision, true, nil
	case len(st.PreviousStableRevisions) == 0:
		return "", false, fmt.Errorf("its workload runs its stable revision %s and no earlier revision was stable", st.StableRevision)
	}
	return st.PreviousStableRevisions[0], false, nil
}

var controllerRevisions = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}

// Undo sets the template of a Rollout's CloneSet back to an earlier
// revision (UndoTarget), read from the ControllerRevision the CloneSet
// controller stored for it, in place: the Pods keep their names and only
// the changed containers restart. The patch tests the CloneSet's
// resourceVersion, so a template changed since it was read is never
// overwritten. A Rollout or CloneSet applied by a GitOps tool is refused
// unless ignoreGitOps: git would put the template back.
func Undo(ctx context.Context, dyn dynamic.Interface, namespace, name string, ignoreGitOps bool) (UndoResult, error) {
	var res UndoResult
	u, ro, err := GetRollout(ctx, dyn, namespace, name)
	if err != nil {
		return res, err
	}
	ref := ro.Spec.WorkloadRef
	if ref.APIVersion != stepwisev1.GroupVersion.String() || ref.Kind != "CloneSet" {
		return res, fmt.Errorf("rollout %s/%s drives %s %s (%s): undo sets back the template of a stepwise.dev CloneSet only; "+
			"revert the template in git (or, for a StatefulSet, kubectl rollout undo)", namespace, name, ref.Kind, ref.Name, ref.APIVersion)
	}
	res.CloneSet = ref.Name
	if owner := GitOpsOwner(u); owner != "" && !ignoreGitOps {
		return res, &GitOpsError{What: "rollout " + namespace + "/" + name, Owner: owner, Instead: "revert the release's commit in git, and the Rollout takes the same fast path"}
	}
	client := dyn.Resource(CloneSetResource()).Namespace(namespace)
	csu, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("reading cloneset %s/%s: %w", namespace, ref.Name, err)
	}
	if owner := GitOpsOwner(csu); owner != "" && !ignoreGitOps {
		return res, &GitOpsError{What: "cloneset " + namespace + "/" + ref.Name, Owner: owner, Instead: "revert the release's commit in git, and the Rollout takes the same fast path"}
	}
	cs, err := CloneSetFromUnstructured(csu)
	if err != nil {
		return res, err
	}
	if cs.Status.ObservedGeneration < cs.Generation {
		return res, fmt.Errorf("cloneset %s/%s has a template its controller has not read yet (generation %d, observed %d): try again once it has",
			namespace, ref.Name, cs.Generation, cs.Status.ObservedGeneration)
	}
	res.Revision, res.Stable, err = UndoTarget(&ro.Status, cs.Status.UpdateRevision)
	if err != nil {
		return res, fmt.Errorf("nothing to undo for rollout %s/%s: %w", namespace, name, err)
	}
	if !res.Stable {
		res.Replaced = ro.Status.StableRevision
	}

	rev, err := dyn.Resource(controllerRevisions).Namespace(namespace).Get(ctx, res.Revision, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("reading revision %s of cloneset %s/%s (the CloneSet keeps spec.revisionHistoryLimit old revisions): %w",
			res.Revision, namespace, ref.Name, err)
	}
	if owner := metav1.GetControllerOf(rev); owner == nil || owner.UID != cs.UID {
		return res, fmt.Errorf("ControllerRevision %s/%s does not belong to cloneset %s", namespace, res.Revision, ref.Name)
	}
	template, found, err := unstructured.NestedMap(rev.Object, "data")
	if err != nil || !found {
		return res, fmt.Errorf("ControllerRevision %s/%s holds no Pod template", namespace, res.Revision)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": csu.GetResourceVersion()},
		{"op": "replace", "path": "/spec/template", "value": template},
	})
	if err != nil {
		return res, fmt.Errorf("encoding the template patch: %w", err)
	}
	if _, err := client.Patch(ctx, ref.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return res, fmt.Errorf("setting the template of cloneset %s/%s back to revision %s (if it changed meanwhile, run undo again): %w",
			namespace, ref.Name, res.Revision, err)
	}
	return res, nil
}
