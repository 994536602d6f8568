package kwokcluster

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// The resync loop is the test bed's stand-in for a kubelet's periodic sync.
//
// kwok acts only on watch events. A Stage whose patch is refused (409: the
// Stages carry the resourceVersion they were computed from) is dropped; a
// patch that fails for other reasons is retried later with the same stale
// Pod, which can cancel a newer job queued for that Pod (kwok v0.8.0's
// addStageJob swaps the queued job per Pod). Either way a Pod can sit in a
// state a kubelet would have moved on from. The loop watches Pods through an
// informer and, when one has looked stuck for ResyncAfter without changing,
// touches an annotation so kwok sees a fresh event and plans again.
//
// "Stuck" mirrors the Stages in test/kwok/stages.yaml; keep them in step.

// startResync starts the loop; it ends when ctx ends or Stop cancels it.
func (c *Cluster) startResync(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(c.clientset, 0,
		informers.WithTransform(func(obj any) (any, error) {
			if m, ok := obj.(metav1.Object); ok {
				m.SetManagedFields(nil)
			}
			return obj, nil
		}))
	podInformer := factory.Core().V1().Pods()
	lister := podInformer.Lister()
	synced := podInformer.Informer().HasSynced
	factory.Start(ctx.Done())

	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced) {
		cancel()
		factory.Shutdown()
		return fmt.Errorf("starting pod resync: informer did not sync: %w", context.Cause(syncCtx))
	}

	c.cancel = cancel
	c.resyncDone = make(chan struct{})
	go func() {
		defer close(c.resyncDone)
		defer factory.Shutdown()
		r := &resyncer{cluster: c, lister: lister, seen: map[types.UID]stuckSince{}}
		ticker := time.NewTicker(c.opts.ResyncInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-ticker.C:
				r.sweep(ctx, now)
			}
		}
	}()
	return nil
}

type stuckSince struct {
	resourceVersion string
	reason          string
	since           time.Time
}

type resyncer struct {
	cluster *Cluster
	lister  corelisters.PodLister
	// seen is when each stuck-looking Pod was first seen in its current
	// resourceVersion; only the loop's goroutine uses it.
	seen map[types.UID]stuckSince
}

func (r *resyncer) sweep(ctx context.Context, now time.Time) {
	pods, err := r.lister.List(labels.Everything())
	if err != nil {
		r.cluster.logf("kwokcluster: resync: listing pods: %v", err)
		return
	}
	present := make(map[types.UID]bool, len(pods))
	var touched []string
	for _, pod := range pods {
		present[pod.UID] = true
		reason, notBefore := stuck(pod)
		if reason == "" {
			delete(r.seen, pod.UID)
			continue
		}
		s, ok := r.seen[pod.UID]
		if !ok || s.resourceVersion != pod.ResourceVersion || s.reason != reason {
			r.seen[pod.UID] = stuckSince{resourceVersion: pod.ResourceVersion, reason: reason, since: now}
			continue
		}
		from := s.since
		if notBefore.After(from) {
			from = notBefore
		}
		if now.Before(from.Add(r.cluster.opts.ResyncAfter)) {
			continue
		}
		if err := r.touch(ctx, pod, now); err != nil {
			if ctx.Err() == nil {
				r.cluster.logf("kwokcluster: resync %s/%s: %v", pod.Namespace, pod.Name, err)
			}
			continue
		}
		// The touch changes the resourceVersion: the next sweep starts over.
		delete(r.seen, pod.UID)
		r.cluster.resyncs.Add(1)
		touched = append(touched, fmt.Sprintf("%s/%s (%s)", pod.Namespace, pod.Name, reason))
	}
	for uid := range r.seen {
		if !present[uid] {
			delete(r.seen, uid)
		}
	}
	if len(touched) > 0 {
		sort.Strings(touched)
		if len(touched) > 5 {
			touched = append(touched[:5], fmt.Sprintf("and %d more", len(touched)-5))
		}
		r.cluster.logf("kwokcluster: resynced %s", strings.Join(touched, ", "))
	}
}

func (r *resyncer) touch(ctx context.Context, pod *corev1.Pod, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationResync, now.UTC().Format(time.RFC3339Nano))
	_, err := r.cluster.clientset.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// stuck says why a Pod is not in a state the Stages leave alone; an empty
// reason means it is settled. A non-zero notBefore is when kwok is due to act
// (a restart deadline): the Pod only counts as stuck from then on.
func stuck(pod *corev1.Pod) (reason string, notBefore time.Time) {
	if pod.DeletionTimestamp != nil {
		if len(pod.Finalizers) == 0 {
			return "deleting", time.Time{}
		}
		return "", time.Time{}
	}
	if pod.Spec.NodeName == "" {
		return "", time.Time{}
	}
	switch pod.Status.Phase {
	case "", corev1.PodPending:
		return "pending", time.Time{}
	case corev1.PodRunning:
	default:
		return "", time.Time{}
	}

	want := make(map[string]string, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		want[c.Name] = c.Image
	}
	for _, s := range pod.Status.ContainerStatuses {
		if img, ok := want[s.Name]; ok && s.State.Running != nil && img != s.Image {
			return "image changed", time.Time{}
		}
	}
	var restartAt time.Time
	for _, s := range pod.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			at := t.FinishedAt.Add(RestartWait(pod))
			if restartAt.IsZero() || at.Before(restartAt) {
				restartAt = at
			}
		}
	}
	if !restartAt.IsZero() {
		return "restart due", restartAt
	}
	if readinessOutOfSync(pod) {
		return "readiness", time.Time{}
	}
	if pod.Status.ObservedGeneration < pod.Generation {
		return "observedGeneration", time.Time{}
	}
	return "", time.Time{}
}

// readinessOutOfSync compares the container ready flags, ContainersReady and
// Ready with what the Stages would write.
func readinessOutOfSync(pod *corev1.Pod) bool {
	wantReady := pod.Annotations[AnnotationReady] != "false"
	containersReady := wantReady && len(pod.Status.ContainerStatuses) == len(pod.Spec.Containers)
	for _, s := range pod.Status.ContainerStatuses {
		running := s.State.Running != nil
		if s.Ready != (running && wantReady) {
			return true
		}
		containersReady = containersReady && running
	}
	gatesOK := true
	for _, g := range pod.Spec.ReadinessGates {
		gatesOK = gatesOK && conditionStatus(pod, g.ConditionType) == corev1.ConditionTrue
	}
	return conditionStatus(pod, corev1.ContainersReady) != toStatus(containersReady) ||
		conditionStatus(pod, corev1.PodReady) != toStatus(containersReady && gatesOK)
}

func conditionStatus(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func toStatus(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

var restartDelayPattern = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(ms|s|m)?$`)

// RestartWait is how long after its (second-truncated) finishedAt a
// container terminated by an image change is started again, per the Pod's
// AnnotationRestartDelay: the delay rounded up to a second, plus one second
// so the wait is never shorter than the delay; zero for a zero delay.
func RestartWait(pod *corev1.Pod) time.Duration {
	raw, ok := pod.Annotations[AnnotationRestartDelay]
	if !ok {
		raw = "1s"
	}
	secs := 1.0
	if m := restartDelayPattern.FindStringSubmatch(raw); m != nil {
		v, err := strconv.ParseFloat(m[1], 64)
		if err == nil {
			switch m[2] {
			case "ms":
				secs = v / 1000
			case "m":
				secs = v * 60
			default:
				secs = v
			}
		}
	}
	if secs <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(secs)+1) * time.Second
}
