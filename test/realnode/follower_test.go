package realnode

import (
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/test/compare"
)

// podFollower follows a namespace's Pods through an informer and feeds the
// current image change's progress and unavailability.
type podFollower struct {
	mu       sync.Mutex
	store    cache.Store
	image    string
	progress *compare.Progress
	unavail  *compare.Unavailability
	timeline *compare.Timeline
	stopCh   chan struct{}
}

func (b *bed) followPods(t *testing.T, ns string) *podFollower {
	f := &podFollower{stopCh: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(b.Clientset, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	f.store = inf.GetStore()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    f.observe,
		UpdateFunc: func(_, obj any) { f.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.progress != nil {
				now := time.Now()
				f.progress.Delete(string(pod.UID), now)
				f.unavail.Delete(string(pod.UID), now)
				f.timeline.Delete(string(pod.UID), now)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(f.stopCh)
	if !cache.WaitForCacheSync(f.stopCh, inf.HasSynced) {
		t.Fatal("the Pod informer did not sync")
	}
	return f
}

func (f *podFollower) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.progress == nil {
		return
	}
	now, state := time.Now(), compare.PodStateOf(pod, f.image, "app")
	f.progress.Set(string(pod.UID), state, now)
	f.unavail.Observe(string(pod.UID), state, now)
	f.timeline.Observe(string(pod.UID), state, now)
}

// begin starts following a change of n Pods to image, from now.
func (f *podFollower) begin(n int, image string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := time.Now()
	f.image = image
	f.progress = compare.NewProgress(n, start)
	f.unavail = compare.NewUnavailability(start)
	f.timeline = compare.NewTimeline(start)
	for _, obj := range f.store.List() {
		pod := obj.(*corev1.Pod)
		state := compare.PodStateOf(pod, image, "app")
		f.progress.Seed(string(pod.UID), state)
		f.unavail.Seed(string(pod.UID), state)
		f.timeline.Seed(string(pod.UID), state)
	}
	return start
}

func (f *podFollower) done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.progress != nil && f.progress.IsDone()
}

// wall is the time to all Pods ready on the image; -1 if not yet.
func (f *podFollower) wall() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.progress.Done
}

func (f *podFollower) firstReady() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.progress.FirstReady
}

// unavailable is the spread of the serving slots' empty time, a slot
// never filled counting until end (or until now when end is -1).
func (f *podFollower) unavailable(end time.Duration) compare.Spread {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end < 0 {
		end = time.Since(f.unavail.Start)
	}
	return f.unavail.Spread(end)
}

// timelineSummary is when the Pods passed each milestone of the change.
func (f *podFollower) timelineSummary() compare.TimelineSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timeline.Summary()
}

// readyOn counts the live Pods ready with the app on image.
func (f *podFollower) readyOn(image string) int {
	ready := 0
	for _, p := range f.pods() {
		if s := compare.PodStateOf(&p, image, "app"); s.Ready && s.NewImage {
			ready++
		}
	}
	return ready
}

// pods are the live (not terminating) Pods, by name order of the cache.
func (f *podFollower) pods() []corev1.Pod {
	var out []corev1.Pod
	for _, obj := range f.store.List() {
		pod := obj.(*corev1.Pod)
		if pod.DeletionTimestamp == nil {
			out = append(out, *pod)
		}
	}
	return out
}

func (f *podFollower) stop() { close(f.stopCh) }

// freeLoopback is a free host:port on 127.0.0.1.
func freeLoopback(t *testing.T) string {
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}
