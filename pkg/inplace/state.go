package inplace

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// ErrCorruptState marks an in-place annotation that cannot be read. The
// caller treats the Pod as needing a fresh update and emits an Event; the
// engine never guesses what a corrupt record meant.
var ErrCorruptState = errors.New("corrupt in-place update state")

// State is how far the in-place update of a Pod got, stored as JSON in the
// annotation stepwise.dev/inplace-update-state. It is written in the same
// API call as the images it describes, so the two never disagree.
type State struct {
	// Revision is the controller-revision-hash the Pod is moving (or moved) to.
	Revision string `json:"revision"`
	// UpdateTimestamp is when this update started.
	UpdateTimestamp metav1.Time `json:"updateTimestamp"`
	// LastContainerStatuses records, per container of this update, the
	// imageID kubelet reported before the update, so that a new imageID
	// proves the container restarted on its new image.
	LastContainerStatuses map[string]ContainerRecord `json:"lastContainerStatuses,omitempty"`
	// PendingBatches are the containers whose images are not patched yet,
	// batch by batch, in order.
	PendingBatches [][]string `json:"pendingBatches,omitempty"`
	// PendingImages holds the target image of every container in
	// PendingBatches, since the Pod spec does not carry them yet.
	PendingImages map[string]string `json:"pendingImages,omitempty"`
	// UpdatedContainers are the containers patched by this update (the
	// batch record); the update waits for all of them before the next batch
	// and before completing.
	UpdatedContainers []string `json:"updatedContainers,omitempty"`
}

// ContainerRecord is what State remembers of one container.
type ContainerRecord struct {
	ImageID string `json:"imageID,omitempty"`
}

// Grace holds the first batch of images while the Pod drains from Service
// endpoints, stored as JSON in the annotation
// stepwise.dev/inplace-update-grace.
type Grace struct {
	// Revision ties the grace record to State.Revision.
	Revision string `json:"revision"`
	// Images maps container name to the image to patch once NotBefore passed.
	Images map[string]string `json:"images"`
	// NotBefore is the earliest time the images may be patched, rounded up
	// to a whole second because the JSON form has second precision.
	NotBefore metav1.Time `json:"notBefore"`
}

// ParseState reads the Pod's state annotation. It returns nil, nil when the
// annotation is absent and an error wrapping ErrCorruptState when it cannot
// be used.
func ParseState(pod *corev1.Pod) (*State, error) {
	raw, ok := pod.Annotations[v1alpha1.InPlaceUpdateStateAnnotation]
	if !ok {
		return nil, nil
	}
	state := &State{}
	if err := json.Unmarshal([]byte(raw), state); err != nil {
		return nil, fmt.Errorf("%w: annotation %s: %w", ErrCorruptState, v1alpha1.InPlaceUpdateStateAnnotation, err)
	}
	if err := state.validate(); err != nil {
		return nil, fmt.Errorf("%w: annotation %s: %w", ErrCorruptState, v1alpha1.InPlaceUpdateStateAnnotation, err)
	}
	return state, nil
}

func (s *State) validate() error {
	if s.Revision == "" {
		return errors.New("revision is empty")
	}
	for _, batch := range s.PendingBatches {
		if len(batch) == 0 {
			return errors.New("empty pending batch")
		}
		for _, name := range batch {
			if _, ok := s.PendingImages[name]; !ok {
				return fmt.Errorf("pending container %q has no image", name)
			}
		}
	}
	return nil
}

// ParseGrace reads the Pod's grace annotation, like ParseState.
func ParseGrace(pod *corev1.Pod) (*Grace, error) {
	raw, ok := pod.Annotations[v1alpha1.InPlaceUpdateGraceAnnotation]
	if !ok {
		return nil, nil
	}
	grace := &Grace{}
	if err := json.Unmarshal([]byte(raw), grace); err != nil {
		return nil, fmt.Errorf("%w: annotation %s: %w", ErrCorruptState, v1alpha1.InPlaceUpdateGraceAnnotation, err)
	}
	switch {
	case grace.Revision == "":
		return nil, fmt.Errorf("%w: annotation %s: revision is empty", ErrCorruptState, v1alpha1.InPlaceUpdateGraceAnnotation)
	case len(grace.Images) == 0:
		return nil, fmt.Errorf("%w: annotation %s: no images", ErrCorruptState, v1alpha1.InPlaceUpdateGraceAnnotation)
	case grace.NotBefore.IsZero():
		return nil, fmt.Errorf("%w: annotation %s: notBefore is empty", ErrCorruptState, v1alpha1.InPlaceUpdateGraceAnnotation)
	}
	return grace, nil
}

// readRecords parses both annotations and checks that they belong together.
// A grace record without a state, or for another revision, cannot have been
// written by the engine, since both are written in the same call.
func readRecords(pod *corev1.Pod) (*State, *Grace, error) {
	state, err := ParseState(pod)
	if err != nil {
		return nil, nil, err
	}
	grace, err := ParseGrace(pod)
	if err != nil {
		return nil, nil, err
	}
	if grace != nil && (state == nil || grace.Revision != state.Revision) {
		return nil, nil, fmt.Errorf("%w: annotation %s does not match annotation %s",
			ErrCorruptState, v1alpha1.InPlaceUpdateGraceAnnotation, v1alpha1.InPlaceUpdateStateAnnotation)
	}
	return state, grace, nil
}

// writeRecords stores state and grace (nil removes it) on the Pod.
func writeRecords(pod *corev1.Pod, state *State, grace *Grace) error {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("encode in-place state: %w", err)
	}
	pod.Annotations[v1alpha1.InPlaceUpdateStateAnnotation] = string(raw)
	if grace == nil {
		delete(pod.Annotations, v1alpha1.InPlaceUpdateGraceAnnotation)
		return nil
	}
	raw, err = json.Marshal(grace)
	if err != nil {
		return fmt.Errorf("encode in-place grace: %w", err)
	}
	pod.Annotations[v1alpha1.InPlaceUpdateGraceAnnotation] = string(raw)
	return nil
}

// addUnique appends names not yet in list and returns the sorted result.
func addUnique(list []string, names ...string) []string {
	for _, n := range names {
		if !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	slices.Sort(list)
	return list
}
