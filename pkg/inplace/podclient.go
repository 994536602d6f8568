package inplace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodClient is all the API access the engine needs. Errors are returned as
// the API server gave them, so conflicts can be recognised and retried.
type PodClient interface {
	// GetFresh reads the Pod from the API server, not from a cache: Update
	// must never decide from a copy older than its own last write.
	GetFresh(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// Update writes the Pod's metadata and spec, honouring its
	// resourceVersion, and refreshes pod from the response.
	Update(ctx context.Context, pod *corev1.Pod) error
	// UpdateStatus writes the Pod's status the same way.
	UpdateStatus(ctx context.Context, pod *corev1.Pod) error
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

func (p *controllerRuntimePodClient) Update(ctx context.Context, pod *corev1.Pod) error {
	return p.client.Update(ctx, pod)
}

func (p *controllerRuntimePodClient) UpdateStatus(ctx context.Context, pod *corev1.Pod) error {
	return p.client.Status().Update(ctx, pod)
}
