package inplace

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Interface is the in-place engine as the CloneSet controller holds it
// (controllers/cloneset), and as another controller may.
type Interface interface {
	// CanUpdateInPlace reports whether a Pod of oldTemplate can be moved to
	// newTemplate without recreating it.
	CanUpdateInPlace(oldTemplate, newTemplate *corev1.PodTemplateSpec) bool
	// Update starts moving a Pod to spec.Revision.
	Update(ctx context.Context, pod *corev1.Pod, spec *UpdateSpec, opts UpdateOptions) UpdateResult
	// Refresh advances an update in progress; call it for every Pod on every
	// reconcile.
	Refresh(ctx context.Context, pod *corev1.Pod) RefreshResult
	// IsUpdating is the package's IsUpdating, remembering settled Pods.
	IsUpdating(pod *corev1.Pod) bool
}

var _ Interface = (*Engine)(nil)

// Engine updates Pods in place through a PodClient.
type Engine struct {
	client  PodClient
	clock   clock.PassiveClock
	settled settledRecords
}

// New returns an engine writing through client and reading time from clk.
func New(client PodClient, clk clock.PassiveClock) *Engine {
	return &Engine{client: client, clock: clk}
}

// UpdateOptions tunes one Update.
type UpdateOptions struct {
	// GracePeriodSeconds is the time between taking the Pod out of service
	// and patching its images, so endpoints drain first.
	GracePeriodSeconds int32
	// ContainerBatches orders the image patches: a batch is patched only
	// once every container patched before runs its new image and is ready.
	// Containers no batch names join the last batch.
	ContainerBatches [][]string
	// RevisionLabel is the Pod label that carries the revision; defaults to
	// controller-revision-hash.
	RevisionLabel string
	// ServiceLabel is the Pod label that Services select by revision, with
	// the revision's short hash (v1alpha1.RevisionHash) as its value; none
	// when empty. It moves to the new revision in the same write that sets
	// InPlaceUpdateReady=False, so the Pod leaves the old revision's
	// endpoints and joins the new one's as not ready at once, and no
	// request reaches it mid-restart under either Service.
	ServiceLabel string
}

// OptionsFromStrategy maps a CloneSet's inPlaceUpdateStrategy (may be nil) to
// UpdateOptions.
func OptionsFromStrategy(s *v1alpha1.InPlaceUpdateStrategy) UpdateOptions {
	if s == nil {
		return UpdateOptions{}
	}
	return UpdateOptions{GracePeriodSeconds: s.GracePeriodSeconds, ContainerBatches: s.ContainerBatches}
}

func (o UpdateOptions) withDefaults() UpdateOptions {
	if o.RevisionLabel == "" {
		o.RevisionLabel = appsv1.ControllerRevisionHashLabelKey
	}
	o.GracePeriodSeconds = max(o.GracePeriodSeconds, 0)
	return o
}

// UpdateResult is the outcome of Update.
type UpdateResult struct {
	// InPlace is true when the Pod is on its way to (or already at) the
	// revision in place; false only with Err.
	InPlace bool
	// Delay is when to look at the Pod again: the grace time left before its
	// images are patched. Zero means the Pod's own events will do.
	Delay time.Duration
	// Pod is the Pod as last written, for resourceVersion expectations; nil
	// when nothing was written.
	Pod *corev1.Pod
	// CorruptState is non-nil (wrapping ErrCorruptState) when the Pod's
	// records were unreadable and the update started over. Emit an Event.
	CorruptState error
	Err          error
}

// CanUpdateInPlace reports whether CalculateSpec finds an in-place spec.
func (e *Engine) CanUpdateInPlace(oldTemplate, newTemplate *corev1.PodTemplateSpec) bool {
	_, err := CalculateSpec(oldTemplate, newTemplate)
	return err == nil
}

// Update moves pod to spec.Revision. It reads the Pod fresh from the API
// server (the cache may predate the engine's own last write), then:
//
//  1. when the update restarts containers, sets InPlaceUpdateReady=False
//     and, in the same write, moves opts.ServiceLabel to the revision,
//     unless it already is for this revision (a resumed update);
//  2. in one write: the state annotation, the revision label, the template
//     labels and annotations, and either the images of the first batch or,
//     within the grace period, a grace annotation holding them. When a
//     container patched by an earlier, superseded update still restarts,
//     every batch waits in the state and Refresh patches it later.
//
// A metadata-only spec is step 2 alone. A Pod that already records
// spec.Revision is left alone, so calling Update again after a crash never
// patches an image twice. Conflicts are retried from a fresh read.
func (e *Engine) Update(ctx context.Context, pod *corev1.Pod, spec *UpdateSpec, opts UpdateOptions) UpdateResult {
	key := pod.Namespace + "/" + pod.Name
	if spec == nil || spec.Revision == "" {
		return UpdateResult{Err: fmt.Errorf("in-place update of pod %s: spec without revision", key)}
	}
	opts = opts.withDefaults()
	var res UpdateResult
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		res = UpdateResult{InPlace: true, Pod: res.Pod}
		current, err := e.client.GetFresh(ctx, pod.Namespace, pod.Name)
		if err != nil {
			return fmt.Errorf("get pod: %w", err)
		}
		now := e.clock.Now()
		plan, err := planUpdate(current, spec, opts, now, outOfServiceSince(current, now))
		if err != nil {
			return err
		}
		res.CorruptState = plan.corrupt
		if plan.noop {
			res.Delay = plan.delay
			return nil
		}
		if plan.needsNotReady && !heldFor(current, spec.Revision) {
			conditions := takeOutOfService(current, ConditionReasonUpdating, updatingMessage(spec.Revision), now)
			var labels map[string]string
			if opts.ServiceLabel != "" {
				// pods/status accepts label changes (only the spec and
				// owner references are kept from the stored Pod).
				labels = map[string]string{opts.ServiceLabel: v1alpha1.RevisionHash(spec.Revision)}
			}
			if err := e.client.PatchConditions(ctx, current, conditions, labels); err != nil {
				return err
			}
			res.Pod = current
			// The grace period starts now that the Pod is out of service,
			// unless it already was (the transition time did not move).
			if plan, err = planUpdate(current, spec, opts, now, outOfServiceSince(current, now)); err != nil {
				return err
			}
		}
		original := current.DeepCopy()
		applyUpdatePlan(current, spec, opts, plan)
		if err := writeRecords(current, plan.state, plan.grace); err != nil {
			return err
		}
		// Decided from a fresh read: no lock, so the kubelet's reaction to
		// the readiness flip just written cannot refuse it.
		if err := e.client.Patch(ctx, original, current, false); err != nil {
			return err
		}
		res.Pod, res.Delay = current, plan.delay
		return nil
	})
	if err != nil {
		res.InPlace, res.Delay = false, 0
		res.Err = fmt.Errorf("in-place update of pod %s to revision %s: %w", key, spec.Revision, err)
	}
	return res
}

// applyUpdatePlan writes the plan's metadata and images onto pod (in
// memory). The engine's own annotations and the revision label are never
// touched by template metadata.
func applyUpdatePlan(pod *corev1.Pod, spec *UpdateSpec, opts UpdateOptions, plan updatePlan) {
	owned := func(key string) bool {
		return key == v1alpha1.InPlaceUpdateStateAnnotation || key == v1alpha1.InPlaceUpdateGraceAnnotation
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	for k, v := range spec.Labels {
		pod.Labels[k] = v
	}
	for _, k := range spec.RemoveLabels {
		if k != opts.RevisionLabel && k != opts.ServiceLabel {
			delete(pod.Labels, k)
		}
	}
	pod.Labels[opts.RevisionLabel] = spec.Revision
	if opts.ServiceLabel != "" {
		// Already there when the update restarts containers; a
		// metadata-only update moves it here.
		pod.Labels[opts.ServiceLabel] = v1alpha1.RevisionHash(spec.Revision)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for k, v := range spec.Annotations {
		if !owned(k) {
			pod.Annotations[k] = v
		}
	}
	for _, k := range spec.RemoveAnnotations {
		if !owned(k) {
			delete(pod.Annotations, k)
		}
	}
	setImages(pod, plan.patch)
}

// setImages writes images into the Pod spec. A container already on its
// target image is left as is: rewriting it would be a no-op for kubelet, but
// skipping it keeps "patch once" visible in the code.
func setImages(pod *corev1.Pod, images map[string]string) {
	for name, image := range images {
		if c, _ := findContainer(pod, name); c != nil && c.Image != image {
			c.Image = image
		}
	}
}
