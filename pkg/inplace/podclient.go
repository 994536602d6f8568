package inplace

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodClient is all the API access the engine needs. Errors are returned as
// the API server gave them, so conflicts can be recognised and retried.
type PodClient interface {
	// GetFresh reads the Pod from the API server, not from a cache: Update
	// must never decide from a copy older than its own last write.
	GetFresh(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// Patch writes what changed from original to modified in metadata and
	// spec as a strategic merge patch (containers merge by name), and
	// refreshes modified from the response. With optimisticLock the patch
	// carries original's resourceVersion; without it, a kubelet's status
	// write in between does not refuse it, which is right only when the
	// decision came from a fresh read.
	Patch(ctx context.Context, original, modified *corev1.Pod, optimisticLock bool) error
	// PatchConditions sets status conditions with a strategic merge patch
	// (conditions merge by type) and refreshes pod from the response. It
	// carries no resourceVersion: a kubelet rewrites a Pod's status all the
	// time, and a precondition would turn each of those into a refused
	// write. The caller's expectations keep it from deciding on a copy
	// older than its own last write. Labels, when not empty, are set in
	// the same write: pods/status keeps only the spec and owner references
	// of the stored Pod, so a label moves with the condition.
	PatchConditions(ctx context.Context, pod *corev1.Pod, conditions []corev1.PodCondition, labels map[string]string) error
}

// NewControllerRuntimePodClient adapts controller-runtime: writes go through
// c, fresh reads through reader, which must bypass the cache (the manager's
// GetAPIReader()).
func NewControllerRuntimePodClient(c client.Client, reader client.Reader) PodClient {
	return &controllerRuntimePodClient{client: c, reader: reader}
}

type controllerRuntimePodClient struct {
	client client.Client
	reader client.Reader
}

func (p *controllerRuntimePodClient) GetFresh(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := p.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

func (p *controllerRuntimePodClient) Patch(ctx context.Context, original, modified *corev1.Pod, optimisticLock bool) error {
	var opts []client.MergeFromOption
	if optimisticLock {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	return p.client.Patch(ctx, modified, client.StrategicMergeFrom(original, opts...))
}

func (p *controllerRuntimePodClient) PatchConditions(ctx context.Context, pod *corev1.Pod, conditions []corev1.PodCondition, labels map[string]string) error {
	patch := map[string]any{"status": map[string]any{"conditions": conditions}}
	if len(labels) > 0 {
		patch["metadata"] = map[string]any{"labels": labels}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding condition patch: %w", err)
	}
	return p.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, body))
}
