package cli

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Snapshot is a Rollout and its workload as last seen together.
type Snapshot struct {
	// Object is the Rollout as served, for -o yaml|json; nil once deleted.
	Object *unstructured.Unstructured
	// Rollout is Object decoded; nil once deleted.
	Rollout *stepwisev1.Rollout
	// Workload is nil when it cannot be read; WorkloadErr says why.
	Workload    *Workload
	WorkloadErr error
}

// View is the snapshot in the shape RenderRollout takes.
func (s Snapshot) View() RolloutView {
	return RolloutView{Rollout: s.Rollout, Workload: s.Workload, WorkloadErr: s.WorkloadErr}
}

// Load reads a Rollout and its workload once. A Rollout that cannot be read
// is an error; a workload that cannot be read is recorded in the snapshot,
// because the Rollout alone is still worth showing.
func Load(ctx context.Context, dyn dynamic.Interface, namespace, name string) (Snapshot, error) {
	u, r, err := GetRollout(ctx, dyn, namespace, name)
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Object: u, Rollout: r}
	s.Workload, s.WorkloadErr = GetWorkload(ctx, dyn, namespace, r.Spec.WorkloadRef)
	return s, nil
}

// Follow calls onChange with the first snapshot and then after every change
// of the Rollout or of its workload, until onChange returns done or an
// error, or ctx ends (its error is returned). Both objects are watched, not
// polled: the workload because the gate and the progress bar move with it
// while the Rollout may not change at all. Changes that arrive while
// onChange runs are coalesced into the next call, so a slow consumer sees
// the latest state rather than a backlog.
func Follow(ctx context.Context, dyn dynamic.Interface, namespace, name string, onChange func(Snapshot) (done bool, err error)) error {
	first, err := Load(ctx, dyn, namespace, name)
	if err != nil {
		return err
	}
	if done, err := onChange(first); done || err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &follower{changed: make(chan struct{}, 1), fatal: make(chan error, 1)}

	rollouts := f.informer(dyn, RolloutResource(), namespace, name, func(err error) {
		f.fail(fmt.Errorf("watching rollout %s/%s: %w", namespace, name, err))
	})
	if rollouts == nil {
		return fmt.Errorf("setting up the watch of rollout %s/%s", namespace, name)
	}
	go rollouts.RunWithContext(ctx)
	go f.notifyOnSync(ctx, rollouts)

	// The workload is watched unless it cannot be: a kind this plugin does
	// not know, or one this user may not read, would only make an informer
	// retry and log forever. A missing workload is watched, as it may come.
	ref := first.Rollout.Spec.WorkloadRef
	var workloads cache.SharedIndexInformer
	if gvr, err := WorkloadResource(ref); err == nil && !isAccessDenied(first.WorkloadErr) {
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		workloads = f.informer(dyn, gvr, namespace, ref.Name, func(err error) {
			f.setWorkloadErr(fmt.Errorf("watching %s %s/%s: %w", ref.Kind, namespace, ref.Name, err))
			wcancel()
		})
		if workloads == nil {
			return fmt.Errorf("setting up the watch of %s %s/%s", ref.Kind, namespace, ref.Name)
		}
		go workloads.RunWithContext(wctx)
		go f.notifyOnSync(wctx, workloads)
	}

	key := namespace + "/" + name
	seen := versions(first)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-f.fatal:
			return err
		case <-f.changed:
		}
		// Until both informers have listed, their stores would show the
		// objects as missing, which they are not. notifyOnSync wakes this
		// loop again once they have.
		if !rollouts.HasSynced() || (workloads != nil && !workloads.HasSynced() && f.workloadError() == nil) {
			continue
		}
		s := Snapshot{}
		if obj, ok, _ := rollouts.GetStore().GetByKey(key); ok {
			s.Object = obj.(*unstructured.Unstructured).DeepCopy()
			if s.Rollout, err = RolloutFromUnstructured(s.Object); err != nil {
				return err
			}
		}
		s.Workload, s.WorkloadErr = f.workload(workloads, namespace, ref, first.WorkloadErr)
		// Informers start with a list that repeats what Load read: an
		// unchanged pair of versions has nothing new to show.
		if v := versions(s); v != seen {
			seen = v
			if done, err := onChange(s); done || err != nil {
				return err
			}
		}
	}
}

// follower is the state the informers' callbacks share with Follow's loop.
type follower struct {
	changed chan struct{}
	fatal   chan error

	mu          sync.Mutex
	workloadErr error
	failed      bool
}

// informer watches one object by name: a field selector keeps the list and
// the watch to that object instead of the whole namespace. denied is called
// when the API server refuses the list or watch, which retrying won't fix;
// other errors are logged and retried with backoff as usual.
func (f *follower) informer(dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string, denied func(error)) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = selector }).Informer()
	// The registration handle is not needed: the informer lives as long as
	// Follow does. Neither call fails on an informer that has not started.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.notify() },
		UpdateFunc: func(any, any) { f.notify() },
		DeleteFunc: func(any) { f.notify() },
	}); err != nil {
		return nil
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if isAccessDenied(err) {
			denied(err)
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil
	}
	return inf
}

// notifyOnSync wakes Follow's loop once inf has listed: the list's events may
// have been delivered while the loop still ignored the informer.
func (f *follower) notifyOnSync(ctx context.Context, inf cache.SharedIndexInformer) {
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		f.notify()
	}
}

func (f *follower) notify() {
	select {
	case f.changed <- struct{}{}:
	default: // a notification is pending already and covers this change
	}
}

func (f *follower) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failed {
		f.failed = true
		f.fatal <- err
	}
}

func (f *follower) setWorkloadErr(err error) {
	f.mu.Lock()
	f.workloadErr = err
	f.mu.Unlock()
	f.notify()
}

func (f *follower) workloadError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.workloadErr
}

// workload reads the workload from its informer; initialErr is why there is
// no informer, when there is none.
func (f *follower) workload(inf cache.SharedIndexInformer, namespace string, ref stepwisev1.WorkloadReference, initialErr error) (*Workload, error) {
	if err := f.workloadError(); err != nil {
		return nil, err
	}
	if inf == nil {
		return nil, initialErr
	}
	obj, ok, _ := inf.GetStore().GetByKey(namespace + "/" + ref.Name)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s not found", ref.Kind, namespace, ref.Name)
	}
	return WorkloadFromUnstructured(obj.(*unstructured.Unstructured))
}

// versions identifies what a snapshot shows, to skip repeats.
func versions(s Snapshot) string {
	v := "rollout:"
	if s.Object != nil {
		v += s.Object.GetResourceVersion()
	}
	v += " workload:"
	switch {
	case s.Workload != nil:
		v += s.Workload.ResourceVersion
	case s.WorkloadErr != nil:
		v += "error " + s.WorkloadErr.Error()
	}
	return v
}

// isAccessDenied is an error that retrying will not fix.
func isAccessDenied(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}
