package podcache

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// ControllerIndex keys a cached Pod by its controller's UID.
const ControllerIndex = "stepwise.dev/pod-controller"

// Stores reads the cached Pods from the Pod informers' indexers: the one
// informer of a cache over every namespace, or one per namespace with
// --watch-namespaces, which controller-runtime keeps behind a front
// without an indexer. It learns them as the cache makes them, through
// NewInformer, which the manager sets as cache.Options.NewInformer, and
// makes none itself: it holds the Pods of the watched namespaces only.
type Stores struct {
	mu       sync.RWMutex
	indexers []toolscache.Indexer
}

// NewStores returns Stores that know no informer yet.
func NewStores() *Stores { return &Stores{} }

// NewInformer makes an informer as controller-runtime does by default
// (toolscache.NewSharedIndexInformer). A Pod informer gets ControllerIndex
// besides the indexers asked for, and its indexer is kept for reads.
func (s *Stores) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	_, isPod := obj.(*corev1.Pod)
	if isPod {
		withController := toolscache.Indexers{ControllerIndex: byController}
		for name, index := range indexers {
			withController[name] = index
		}
		indexers = withController
	}
	informer := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	if isPod {
		s.mu.Lock()
		s.indexers = append(s.indexers, informer.GetIndexer())
		s.mu.Unlock()
	}
	return informer
}

// byController is ControllerIndex's function.
func byController(obj any) ([]string, error) {
	meta, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	owner := metav1.GetControllerOfNoCopy(meta)
	if owner == nil {
		return nil, nil
	}
	return []string{string(owner.UID)}, nil
}

// Controlled returns the cached Pods whose controller has uid (a UID names
// one object, in one namespace) and that selector matches. They are the
// cache's own objects: nothing may change them (a write goes to a
// DeepCopy), and make test-integration runs the manager with client-go's
// cache mutation detector, which fails on a write into the cache.
func (s *Stores) Controlled(uid types.UID, selector labels.Selector) ([]*corev1.Pod, error) {
	return s.read(ControllerIndex, string(uid), selector)
}

// List returns the cached Pods of namespace that selector matches, the
// cache's own objects as Controlled's are.
func (s *Stores) List(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	return s.read(toolscache.NamespaceIndex, namespace, selector)
}

func (s *Stores) read(index, key string, selector labels.Selector) ([]*corev1.Pod, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var pods []*corev1.Pod
	for _, indexer := range s.indexers {
		objs, err := indexer.ByIndex(index, key)
		if err != nil {
			return nil, fmt.Errorf("reading cached Pods by %s %q: %w", index, key, err)
		}
		if pods == nil {
			pods = make([]*corev1.Pod, 0, len(objs))
		}
		for _, obj := range objs {
			pod, ok := obj.(*corev1.Pod)
			if !ok || !selector.Matches(labels.Set(pod.Labels)) {
				continue
			}
			pods = append(pods, pod)
		}
	}
	return pods, nil
}
