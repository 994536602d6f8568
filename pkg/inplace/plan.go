package inplace

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds the pure half of Update and Refresh: given a Pod and the
// time, decide what to write. Engine methods only fetch, apply and retry.

// updatePlan is what one Update call writes.
type updatePlan struct {
	// noop: the Pod already records this revision; nothing to write.
	noop bool
	// needsNotReady: the plan restarts containers (or waits for restarts),
	// so the Pod must be out of service first.
	needsNotReady bool
	state         *State
	grace         *Grace
	// patch maps container name to the image written now.
	patch map[string]string
	// delay is the grace time left; zero when nothing waits on time.
	delay time.Duration
	// corrupt is set when the Pod's records were unreadable and ignored.
	corrupt error
}

// planUpdate decides how to move pod to spec. falseSince is when the Pod left
// (or leaves) service, the start of the grace period.
//
// An update already in progress is merged, not dropped: its pending images
// remain targets unless spec overrides them, and its patched containers stay
// awaited. So a superseding or rolling-back update neither loses a batch nor
// patches a container twice for the same image.
func planUpdate(pod *corev1.Pod, spec *UpdateSpec, opts UpdateOptions, now, falseSince time.Time) (updatePlan, error) {
	var plan updatePlan
	state, grace, err := readRecords(pod)
	if err != nil {
		// Start over; the caller reports it. Every target is then awaited,
		// since nothing says which containers already restarted.
		plan.corrupt, state, grace = err, nil, nil
	}
	if state != nil && state.Revision == spec.Revision {
		plan.noop = true
		if grace != nil {
			plan.delay = max(grace.NotBefore.Sub(now), 0)
		}
		return plan, nil
	}

	inProgress := state != nil && (grace != nil || len(state.PendingBatches) > 0 || heldByEngine(pod))
	targets := map[string]string{}
	awaited := map[string]ContainerRecord{}
	if inProgress {
		maps.Copy(targets, state.PendingImages)
		if grace != nil {
			maps.Copy(targets, grace.Images)
		}
		for _, name := range state.UpdatedContainers {
			awaited[name] = state.LastContainerStatuses[name]
		}
	}
	maps.Copy(targets, spec.images())

	records := map[string]ContainerRecord{}
	var toPatch, updated []string
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		c, _ := findContainer(pod, name)
		if c == nil {
			return plan, &NotInPlaceError{Field: fmt.Sprintf("spec.containers[%s]", name), Reason: "container not in pod"}
		}
		if c.Image != targets[name] {
			toPatch = append(toPatch, name)
			records[name] = ContainerRecord{ImageID: currentImageID(pod, name)}
			continue
		}
		if rec, ok := awaited[name]; ok {
			updated = append(updated, name)
			records[name] = rec
		} else if plan.corrupt != nil {
			updated = append(updated, name)
			records[name] = ContainerRecord{ImageID: currentImageID(pod, name)}
		}
		// Otherwise the Pod already runs this image by spec and nothing
		// patched it: no restart is coming, nothing to wait for.
	}
	for name, rec := range awaited {
		if _, ok := targets[name]; !ok {
			updated = append(updated, name)
			records[name] = rec
		}
	}
	slices.Sort(updated)

	// Like Refresh, never patch a batch while a container patched earlier
	// still restarts: batches keep their order across superseding updates.
	settled := true
	for _, name := range updated {
		if !containerSettled(pod, name, records[name].ImageID) {
			settled = false
		}
	}
	batches := makeBatches(toPatch, opts.ContainerBatches)
	plan.needsNotReady = !settled || len(batches) > 0

	plan.state = &State{
		Revision:              spec.Revision,
		UpdateTimestamp:       metav1.NewTime(now),
		LastContainerStatuses: records,
		UpdatedContainers:     updated,
	}
	if len(records) == 0 {
		plan.state.LastContainerStatuses = nil
	}
	if len(batches) == 0 {
		return plan, nil
	}
	notBefore := v1alpha1.CeilSecond(falseSince.Add(time.Duration(opts.GracePeriodSeconds) * time.Second))
	switch {
	case opts.GracePeriodSeconds > 0 && now.Before(notBefore):
		plan.grace = &Grace{Revision: spec.Revision, Images: pick(targets, batches[0]), NotBefore: metav1.NewTime(notBefore)}
		plan.delay = notBefore.Sub(now)
		batches = batches[1:]
	case settled:
		plan.patch = pick(targets, batches[0])
		plan.state.UpdatedContainers = addUnique(plan.state.UpdatedContainers, batches[0]...)
		batches = batches[1:]
	}
	plan.state.PendingBatches = batches
	for _, batch := range batches {
		if plan.state.PendingImages == nil {
			plan.state.PendingImages = map[string]string{}
		}
		maps.Copy(plan.state.PendingImages, pick(targets, batch))
	}
	if len(batches) == 0 {
		plan.state.PendingBatches = nil
	}
	return plan, nil
}

// makeBatches groups the containers to patch by the configured batches, in
// order. Containers no batch names join the last batch; empty batches are
// dropped. Each batch is sorted so the plan is deterministic.
func makeBatches(names []string, configured [][]string) [][]string {
	if len(names) == 0 {
		return nil
	}
	batches := make([][]string, max(len(configured), 1))
	placed := map[string]bool{}
	for i, batch := range configured {
		for _, name := range batch {
			if slices.Contains(names, name) && !placed[name] {
				batches[i] = append(batches[i], name)
				placed[name] = true
			}
		}
	}
	last := len(batches) - 1
	for _, name := range names {
		if !placed[name] {
			batches[last] = append(batches[last], name)
		}
	}
	out := batches[:0]
	for _, batch := range batches {
		if len(batch) > 0 {
			slices.Sort(batch)
			out = append(out, batch)
		}
	}
	return out
}

func pick(images map[string]string, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, name := range names {
		out[name] = images[name]
	}
	return out
}

// refreshAction is the one write a Refresh makes, if any.
type refreshAction int

const (
	refreshNothing refreshAction = iota
	// refreshSetReady writes InPlaceUpdateReady=True.
	refreshSetReady
	// refreshSetNotReady writes InPlaceUpdateReady=False before a patch.
	refreshSetNotReady
	// refreshPatch writes the next images and the advanced state.
	refreshPatch
)

// refreshPlan is what one Refresh call does.
type refreshPlan struct {
	action  refreshAction
	phase   Phase
	delay   time.Duration
	reason  string // for refreshSetReady and refreshSetNotReady
	message string
	state   *State // for refreshPatch
	patch   map[string]string
	corrupt error
	// settled: the records are readable and hold nothing left to do.
	settled bool
}

// planRefresh decides the next step of the Pod's in-place update, if any.
// It only advances what the records say; it never starts an update.
// settled says the records are known to hold nothing left to do
// (settledRecords); they are then decoded only if the engine holds the Pod.
func planRefresh(pod *corev1.Pod, now time.Time, settled bool) refreshPlan {
	held := heldByEngine(pod)
	var state *State
	var grace *Grace
	if !settled || held {
		var err error
		if state, grace, err = readRecords(pod); err != nil {
			return refreshPlan{phase: PhaseUpdating, corrupt: err}
		}
	}
	if recordsSettled(state, grace, nil) && !held {
		if getCondition(pod) == nil {
			// A new Pod: nothing to wait for, let its readiness gate pass.
			return refreshPlan{action: refreshSetReady, phase: PhaseIdle, reason: ConditionReasonNotUpdating, settled: true}
		}
		return refreshPlan{phase: PhaseIdle, settled: true}
	}

	if grace != nil && now.Before(grace.NotBefore.Time) {
		return refreshPlan{phase: PhaseWaiting, delay: grace.NotBefore.Sub(now)}
	}
	// Every container patched so far must run its new image and be ready
	// before the next batch, so a sidecar is serving before the app restarts.
	if state != nil {
		for _, name := range state.UpdatedContainers {
			if !containerSettled(pod, name, state.LastContainerStatuses[name].ImageID) {
				return refreshPlan{phase: PhaseUpdating}
			}
		}
	}
	if grace != nil {
		if !conditionIsFalse(pod) {
			return notReadyFirst(state)
		}
		next := *state
		next.UpdatedContainers = addUnique(slices.Clone(state.UpdatedContainers), slices.Collect(maps.Keys(grace.Images))...)
		return refreshPlan{action: refreshPatch, phase: PhaseUpdating, state: &next, patch: grace.Images}
	}
	if state != nil && len(state.PendingBatches) > 0 {
		if !conditionIsFalse(pod) {
			return notReadyFirst(state)
		}
		batch := state.PendingBatches[0]
		next := *state
		next.PendingBatches = slices.Clone(state.PendingBatches[1:])
		next.PendingImages = maps.Clone(state.PendingImages)
		for _, name := range batch {
			delete(next.PendingImages, name)
		}
		if len(next.PendingBatches) == 0 {
			next.PendingBatches, next.PendingImages = nil, nil
		}
		next.UpdatedContainers = addUnique(slices.Clone(state.UpdatedContainers), batch...)
		return refreshPlan{action: refreshPatch, phase: PhaseUpdating, state: &next, patch: pick(state.PendingImages, batch)}
	}
	if !held {
		return refreshPlan{phase: PhaseIdle}
	}
	// Held by the engine with nothing left to do. Usually the update just
	// finished. When the hold names another revision than the state, or no
	// container was patched, an Update stopped between its two writes: the
	// Pod still runs what it ran, so it may serve again (a resumed Update
	// takes it out again) but nothing completed.
	if state == nil || len(state.UpdatedContainers) == 0 || !heldFor(pod, state.Revision) {
		return refreshPlan{action: refreshSetReady, phase: PhaseIdle, reason: ConditionReasonNotUpdating}
	}
	return refreshPlan{action: refreshSetReady, phase: PhaseCompleted, reason: ConditionReasonCompleted}
}

// notReadyFirst takes the Pod out of service before a patch, when something
// set the condition True while images were still to patch.
func notReadyFirst(state *State) refreshPlan {
	return refreshPlan{
		action:  refreshSetNotReady,
		phase:   PhaseUpdating,
		reason:  ConditionReasonUpdating,
		message: updatingMessage(state.Revision),
	}
}
