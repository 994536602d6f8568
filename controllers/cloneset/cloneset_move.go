package cloneset

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/inplace"
)

// moveWay is how a Pod reaches its target revision.
type moveWay int

const (
	// moveInPlace: the engine patches the Pod's changed fields.
	moveInPlace moveWay = iota
	// moveRecreate: the Pod is deleted (or held by its preDelete hook) for
	// a new one on the target revision.
	moveRecreate
	// moveHeldForHook: the inPlaceUpdate hook holds the Pod in
	// PreparingUpdate until its controller releases it.
	moveHeldForHook
	// moveRefused: the change cannot be made in place and
	// updateStrategy.type InPlaceOnly forbids recreating the Pod.
	moveRefused
)

// moveChoice is decideMove's answer.
type moveChoice struct {
	way moveWay
	// spec is the in-place change, for moveInPlace.
	spec *inplace.UpdateSpec
	// note says why: the deletion's note for moveRecreate, the refusal
	// for moveRefused.
	note string
}

// decideMove chooses how pod reaches target: by recreation under the
// Recreate strategy or when more than in-place fields changed (refused
// under InPlaceOnly), held first when an inPlaceUpdate hook holds it, in
// place otherwise, with the hook's Updating state riding in the same write.
func decideMove(pod *corev1.Pod, revs *revisionSet, target *appsv1.ControllerRevision, strategy stepwisev1.CloneSetUpdateStrategyType, hook *stepwisev1.LifecycleHook) (moveChoice, error) {
	if strategy == "" || strategy == stepwisev1.RecreateCloneSetUpdateStrategyType {
		return moveChoice{way: moveRecreate, note: "recreating on revision " + target.Name}, nil
	}
	spec, err := inPlaceSpec(pod, revs, target)
	var notInPlace *inplace.NotInPlaceError
	switch {
	case errors.As(err, &notInPlace) && strategy == stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType:
		return moveChoice{way: moveRefused, note: fmt.Sprintf("pod %s cannot move to revision %s in place: %s changed, and updateStrategy.type InPlaceOnly forbids recreating it; change only container images, or use InPlaceIfPossible", pod.Name, target.Name, notInPlace.Field)}, nil
	case errors.As(err, &notInPlace):
		return moveChoice{way: moveRecreate, note: fmt.Sprintf("recreating on revision %s: %s cannot change in place", target.Name, notInPlace.Field)}, nil
	case err != nil:
		return moveChoice{}, err
	}
	if hook != nil {
		if hooked(pod, hook) {
			return moveChoice{way: moveHeldForHook}, nil
		}
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
		spec.Labels[stepwisev1.LifecycleStateLabel] = stepwisev1.LifecycleStateUpdating
	}
	return moveChoice{way: moveInPlace, spec: spec}, nil
}

// inPlaceSpec diffs the Pod's own revision against the target revision.
func inPlaceSpec(pod *corev1.Pod, revs *revisionSet, target *appsv1.ControllerRevision) (*inplace.UpdateSpec, error) {
	from := revs.byName[pod.Labels[RevisionLabel]]
	if from == nil {
		return nil, &inplace.NotInPlaceError{Field: fmt.Sprintf("the pod's revision %q (no longer recorded)", pod.Labels[RevisionLabel])}
	}
	fromTemplate, err := templateOf(from)
	if err != nil {
		return nil, err
	}
	toTemplate, err := templateOf(target)
	if err != nil {
		return nil, err
	}
	spec, err := inplace.CalculateSpec(fromTemplate, toTemplate)
	if err != nil {
		return nil, err
	}
	spec.Revision = target.Name
	return spec, nil
}
