package dashboard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// Hub watches the Rollouts of one namespace (or all) with informers, along
// with their workloads, Pods and Events, and tells subscribers when any of
// them changed. Views are computed from the informers' caches: serving a
// page costs no API request. Every request to the API server is made with
// the caller's credentials, so the dashboard shows what they may read.
type Hub struct {
	dyn       dynamic.Interface
	namespace string

	rollouts cache.SharedIndexInformer
	pods     cache.SharedIndexInformer
	events   cache.SharedIndexInformer

	ctx context.Context

	mu sync.Mutex
	// workloads holds one informer per workload kind a Rollout refers to,
	// started on first sight: a kind nobody uses (an OpenKruise CloneSet
	// on a cluster without Kruise) is never listed.
	workloads map[schema.GroupVersionResource]*kindWatch
	// denied records what the API server refused to list or watch, by
	// what ("rollouts", "pods", "events", a workload resource).
	denied  map[string]string
	history map[string][]stepwisev1.Measurement
	subs    map[chan struct{}]struct{}
}

type kindWatch struct {
	informer cache.SharedIndexInformer
}

// NewHub prepares the informers; Start runs them. namespace "" watches
// every namespace, which needs cluster-wide list and watch rights.
func NewHub(dyn dynamic.Interface, kube kubernetes.Interface, namespace string) *Hub {
	h := &Hub{
		dyn: dyn, namespace: namespace,
		workloads: map[schema.GroupVersionResource]*kindWatch{},
		denied:    map[string]string{},
		history:   map[string][]stepwisev1.Measurement{},
		subs:      map[chan struct{}]struct{}{},
	}
	h.rollouts = dynamicinformer.NewFilteredDynamicInformer(dyn, cli.RolloutResource(), namespace, 0, cache.Indexers{}, nil).Informer()
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace))
	h.pods = factory.Core().V1().Pods().Informer()
	h.events = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			// Only Events about Rollouts: a busy namespace has many more.
			o.FieldSelector = fields.OneTermEqualSelector("involvedObject.kind", "Rollout").String()
		})).Core().V1().Events().Informer()
	return h
}

// Start runs the informers until ctx ends and waits until the Rollouts are
// listed (or the list was refused, which the views then report).
func (h *Hub) Start(ctx context.Context) error {
	h.ctx = ctx
	// Pods keep only what the page shows: no managed fields, no spec
	// beyond the node, which saves most of their memory.
	if err := h.pods.SetTransform(trimPod); err != nil {
		return fmt.Errorf("setting up the Pod watch: %w", err)
	}
	if _, err := h.rollouts.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { h.rolloutChanged(o) },
		UpdateFunc: func(_, o any) { h.rolloutChanged(o) },
		DeleteFunc: func(o any) { h.rolloutDeleted(o) },
	}); err != nil {
		return fmt.Errorf("setting up the Rollout watch: %w", err)
	}
	for what, inf := range map[string]cache.SharedIndexInformer{"rollouts": h.rollouts, "pods": h.pods, "events": h.events} {
		if err := h.run(ctx, what, inf); err != nil {
			return err
		}
	}
	synced := func() bool { return h.rollouts.HasSynced() || h.isDenied("rollouts") }
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return fmt.Errorf("listing rollouts: %w", ctx.Err())
	}
	return nil
}

// run starts one informer that notifies on every change and stops for good
// when the API server refuses it: retrying a 403 only fills the log.
func (h *Hub) run(ctx context.Context, what string, inf cache.SharedIndexInformer) error {
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { h.notify() },
		UpdateFunc: func(any, any) { h.notify() },
		DeleteFunc: func(any) { h.notify() },
	}); err != nil {
		return fmt.Errorf("setting up the watch of %s: %w", what, err)
	}
	ictx, cancel := context.WithCancel(ctx)
	if err := inf.SetWatchErrorHandlerWithContext(func(c context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) {
			h.deny(what, err)
			cancel()
			return
		}
		cache.DefaultWatchErrorHandler(c, r, err)
	}); err != nil {
		cancel()
		return fmt.Errorf("setting up the watch of %s: %w", what, err)
	}
	go inf.RunWithContext(ictx)
	go func() {
		if cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
			h.notify()
		}
	}()
	return nil
}

func (h *Hub) deny(what string, err error) {
	h.mu.Lock()
	h.denied[what] = err.Error()
	h.mu.Unlock()
	h.notify()
}

func (h *Hub) isDenied(what string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.denied[what] != ""
}

func (h *Hub) deniedMessage(what string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.denied[what]
}

// rolloutChanged records the measurements the Rollout shows (its status
// keeps only the last few) and starts watching its workload's kind.
func (h *Hub) rolloutChanged(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	r, err := cli.RolloutFromUnstructured(u)
	if err == nil {
		key := u.GetNamespace() + "/" + u.GetName()
		h.mu.Lock()
		h.history[key] = MergeMeasurements(h.history[key], r.Status.Measurements)
		h.mu.Unlock()
		if gvr, err := cli.WorkloadResource(r.Spec.WorkloadRef); err == nil {
			h.watchWorkloads(gvr)
		}
	}
	h.notify()
}

// rolloutDeleted forgets a deleted Rollout's measurements: a Rollout made
// again under the same name starts a new history.
func (h *Hub) rolloutDeleted(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if u, ok := o.(*unstructured.Unstructured); ok {
		h.mu.Lock()
		delete(h.history, u.GetNamespace()+"/"+u.GetName())
		h.mu.Unlock()
	}
	h.notify()
}

func (h *Hub) watchWorkloads(gvr schema.GroupVersionResource) {
	h.mu.Lock()
	if _, ok := h.workloads[gvr]; ok || h.ctx == nil {
		h.mu.Unlock()
		return
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(h.dyn, gvr, h.namespace, 0, cache.Indexers{}, nil).Informer()
	h.workloads[gvr] = &kindWatch{informer: inf}
	h.mu.Unlock()
	if err := h.run(h.ctx, gvr.Resource+"."+gvr.Group, inf); err != nil {
		h.deny(gvr.Resource+"."+gvr.Group, err)
	}
}

// Subscribe returns a channel that receives a value after any change (one
// pending value covers any number of changes), and a function to stop.
func (h *Hub) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *Hub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// ListView is what the list page shows.
type ListView struct {
	// Namespace is the namespace watched, "" for all.
	Namespace string    `json:"namespace"`
	Error     string    `json:"error,omitempty"`
	Rollouts  []Summary `json:"rollouts"`
}

// List is the list page from the caches.
func (h *Hub) List() ListView {
	v := ListView{Namespace: h.namespace, Rollouts: []Summary{}}
	if msg := h.deniedMessage("rollouts"); msg != "" {
		v.Error = "cannot watch Rollouts: " + msg
		return v
	}
	var sources []Source
	for _, o := range h.rollouts.GetStore().List() {
		if s, ok := h.source(o.(*unstructured.Unstructured), false); ok {
			sources = append(sources, s)
		}
	}
	v.Rollouts = List(sources)
	return v
}

// DetailView is what the Rollout page shows: the Rollout, or why not.
type DetailView struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Error     string  `json:"error,omitempty"`
	Rollout   *Detail `json:"rollout,omitempty"`
	// Notes are the parts that could not be read (Pods, Events).
	Notes []string `json:"notes,omitempty"`
}

// Detail is the Rollout page of namespace/name from the caches.
func (h *Hub) Detail(namespace, name string, now time.Time) DetailView {
	v := DetailView{Namespace: namespace, Name: name}
	switch {
	case h.namespace != "" && namespace != h.namespace:
		v.Error = fmt.Sprintf("this dashboard watches namespace %s only", h.namespace)
		return v
	case h.isDenied("rollouts"):
		v.Error = "cannot watch Rollouts: " + h.deniedMessage("rollouts")
		return v
	}
	o, ok, _ := h.rollouts.GetStore().GetByKey(namespace + "/" + name)
	if !ok {
		v.Error = fmt.Sprintf("rollout %s/%s not found", namespace, name)
		return v
	}
	s, ok := h.source(o.(*unstructured.Unstructured), true)
	if !ok {
		v.Error = fmt.Sprintf("rollout %s/%s cannot be decoded", namespace, name)
		return v
	}
	d := BuildDetail(s, now)
	v.Rollout = &d
	for _, what := range []string{"pods", "events"} {
		if msg := h.deniedMessage(what); msg != "" {
			v.Notes = append(v.Notes, "cannot watch "+what+": "+msg)
		}
	}
	return v
}

// Rollout returns the cached Rollout, for the checks before a request.
func (h *Hub) Rollout(namespace, name string) (*stepwisev1.Rollout, bool) {
	if h.namespace != "" && namespace != h.namespace {
		return nil, false
	}
	o, ok, _ := h.rollouts.GetStore().GetByKey(namespace + "/" + name)
	if !ok {
		return nil, false
	}
	r, err := cli.RolloutFromUnstructured(o.(*unstructured.Unstructured))
	return r, err == nil
}

// source gathers a Rollout and what belongs to it from the caches; full
// adds its Pods, Events and measurement history.
func (h *Hub) source(u *unstructured.Unstructured, full bool) (Source, bool) {
	r, err := cli.RolloutFromUnstructured(u)
	if err != nil {
		return Source{}, false
	}
	s := Source{Rollout: r}
	var selector labels.Selector
	s.Workload, selector, s.WorkloadErr = h.workload(r)
	if !full {
		return s, true
	}
	h.mu.Lock()
	s.History = h.history[r.Namespace+"/"+r.Name]
	h.mu.Unlock()
	if selector != nil {
		for _, o := range h.pods.GetStore().List() {
			p := o.(*corev1.Pod)
			if p.Namespace == r.Namespace && selector.Matches(labels.Set(p.Labels)) {
				s.Pods = append(s.Pods, *p)
			}
		}
	}
	for _, o := range h.events.GetStore().List() {
		e := o.(*corev1.Event)
		io := e.InvolvedObject
		if e.Namespace == r.Namespace && io.Kind == "Rollout" && io.Name == r.Name &&
			strings.HasPrefix(io.APIVersion, stepwisev1.GroupVersion.Group+"/") {
			s.Events = append(s.Events, *e)
		}
	}
	return s, true
}

// workload reads the Rollout's workload from its kind's informer, with the
// label selector of its Pods.
func (h *Hub) workload(r *stepwisev1.Rollout) (*cli.Workload, labels.Selector, error) {
	ref := r.Spec.WorkloadRef
	gvr, err := cli.WorkloadResource(ref)
	if err != nil {
		return nil, nil, err
	}
	what := gvr.Resource + "." + gvr.Group
	if msg := h.deniedMessage(what); msg != "" {
		return nil, nil, fmt.Errorf("cannot watch %s: %s", what, msg)
	}
	h.mu.Lock()
	kw := h.workloads[gvr]
	h.mu.Unlock()
	if kw == nil || !kw.informer.HasSynced() {
		return nil, nil, fmt.Errorf("%s %s: not listed yet", ref.Kind, ref.Name)
	}
	o, ok, _ := kw.informer.GetStore().GetByKey(r.Namespace + "/" + ref.Name)
	if !ok {
		return nil, nil, fmt.Errorf("%s %s/%s not found", ref.Kind, r.Namespace, ref.Name)
	}
	u := o.(*unstructured.Unstructured)
	w, err := cli.WorkloadFromUnstructured(u)
	if err != nil {
		return nil, nil, err
	}
	var selector labels.Selector
	if m, found, _ := unstructured.NestedMap(u.Object, "spec", "selector"); found {
		ls := &metav1.LabelSelector{}
		if err := runtimeFromUnstructured(m, ls); err == nil {
			if sel, err := metav1.LabelSelectorAsSelector(ls); err == nil && !sel.Empty() {
				selector = sel
			}
		}
	}
	return w, selector, nil
}

// trimPod drops what the page never shows from cached Pods.
func trimPod(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{
			Phase: p.Status.Phase, Conditions: p.Status.Conditions, ContainerStatuses: p.Status.ContainerStatuses,
		},
	}, nil
}

func runtimeFromUnstructured(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}
