package rollout_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// The pilots play, Pod by Pod, the controllers envtest lacks: a
// StatefulSet controller and OpenKruise's CloneSet controller, as far as a
// rollout and its rollback need them. Pods are unscheduled, so the API
// server deletes them at once, and a pilot marks a Pod Ready readyAfter after
// creating it.

// readyAfter is how long a recreated Pod takes to become ready: long enough
// for the tests to see a rollback wait for it.
const readyAfter = 700 * time.Millisecond

// runPilot calls once every 50 ms until the test ends.
func runPilot(t *testing.T, what string, once func(ctx context.Context) error) {
	t.Helper()
	ctx := testContext(t)
	var mu sync.Mutex
	var lastErr error
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := once(ctx); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if lastErr != nil {
			t.Logf("%s: last error: %v", what, lastErr)
		}
	})
}

// podOf builds a Pod of a workload on revision, running image, not ready yet.
func podOf(ns, name, generateName string, owner metav1.OwnerReference, labels map[string]string, revision, image string) *corev1.Pod {
	l := map[string]string{appsv1.ControllerRevisionHashLabelKey: revision}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, GenerateName: generateName, Labels: l, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// ripen marks the Pods created more than readyAfter ago Ready. Creation
// times are kept to the second, truncated: a second more makes sure.
func ripen(ctx context.Context, pods []corev1.Pod) error {
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || isReady(p) || time.Since(p.CreationTimestamp.Time) < readyAfter+time.Second {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		if err := env.client.Status().Update(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podsOf(ctx context.Context, ns string, labels map[string]string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := env.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// --- StatefulSet ---

func newStatefulSet(ns, name string, replicas int32, version string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image(version)}}},
			},
		},
	}
}

// statefulSetPilot plays the StatefulSet controller of Kubernetes 1.37 for
// sts: a missing Pod is created on the current revision when its ordinal is
// below the partition, else on the update revision; Pods at or above the
// partition that are not on the update revision are deleted one at a time
// while every Pod is ready; raising the partition moves no Pod back.
func statefulSetPilot(t *testing.T, ns, name string) {
	t.Helper()
	images := map[string]string{} // revision -> image, as ControllerRevisions would keep
	runPilot(t, "StatefulSet pilot", func(ctx context.Context) error {
		sts := &appsv1.StatefulSet{}
		if err := env.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sts); err != nil {
			return err
		}
		update := revisionOf(name, sts.Spec.Template.Spec)
		images[update] = sts.Spec.Template.Spec.Containers[0].Image
		current := sts.Status.CurrentRevision
		if current == "" {
			current = update
		}
		replicas := *sts.Spec.Replicas
		partition := int32(0)
		if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			partition = *ru.Partition
		}
		pods, err := podsOf(ctx, ns, sts.Spec.Selector.MatchLabels)
		if err != nil {
			return err
		}
		if err := ripen(ctx, pods); err != nil {
			return err
		}
		byName := map[string]*corev1.Pod{}
		for i := range pods {
			byName[pods[i].Name] = &pods[i]
		}
		owner := *metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
		allReady := true
		for ord := range replicas {
			podName := name + "-" + strconv.Itoa(int(ord))
			p, ok := byName[podName]
			if !ok {
				rev := update
				if ord < partition {
					rev = current
				}
				if err := env.client.Create(ctx, podOf(ns, podName, "", owner, sts.Spec.Template.Labels, rev, images[rev])); err != nil {
					return err
				}
				allReady = false
				continue
			}
			allReady = allReady && isReady(p) && p.DeletionTimestamp == nil
		}
		var st appsv1.StatefulSetStatus
		st.ObservedGeneration, st.Replicas, st.UpdateRevision, st.CurrentRevision = sts.Generation, int32(len(pods)), update, current
		for i := range pods {
			p := &pods[i]
			if isReady(p) {
				st.ReadyReplicas++
				st.AvailableReplicas++
			}
			if p.Labels[appsv1.ControllerRevisionHashLabelKey] == update {
				st.UpdatedReplicas++
			} else {
				st.CurrentReplicas++
			}
		}
		if allReady {
			for ord := replicas - 1; ord >= partition; ord-- {
				p := byName[name+"-"+strconv.Itoa(int(ord))]
				if p.Labels[appsv1.ControllerRevisionHashLabelKey] != update {
					if err := env.client.Delete(ctx, p); err != nil {
						return err
					}
					break
				}
			}
			if st.UpdatedReplicas == replicas {
				st.CurrentRevision = update
			}
		}
		if equalJSON(sts.Status, st) {
			return nil
		}
		sts.Status = st
		return env.client.Status().Update(ctx, sts)
	})
}

// pilotedStatefulSet creates a StatefulSet of replicas Pods on version,
// with statefulSetPilot as its controller, and waits for its Pods.
func pilotedStatefulSet(t *testing.T, ns, name string, replicas int32, version string) {
	t.Helper()
	sts := newStatefulSet(ns, name, replicas, version)
	if err := env.client.Create(testContext(t), sts); err != nil {
		t.Fatalf("creating StatefulSet: %v", err)
	}
	statefulSetPilot(t, ns, name)
	waitPods(t, ns, sts.Spec.Selector.MatchLabels, int(replicas), revisionOf(name, sts.Spec.Template.Spec))
}

// releaseStatefulSet commits version and waits until the Rollout of the
// same name is Healthy with it as its stable revision.
func releaseStatefulSet(t *testing.T, ns, name, version string) {
	t.Helper()
	commitStatefulSet(t, ns, name, version)
	stable := revisionOf(name, newStatefulSet(ns, name, 1, version).Spec.Template.Spec)
	eventually(t, ns, name, func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal(stable))
	})
}

// commitStatefulSet changes the StatefulSet's image as git would.
func commitStatefulSet(t *testing.T, ns, name, version string) {
	t.Helper()
	sts := getStatefulSet(t, ns, name)
	patch := client.MergeFrom(sts.DeepCopy())
	sts.Spec.Template.Spec.Containers[0].Image = image(version)
	if err := env.client.Patch(testContext(t), sts, patch, client.FieldOwner("git")); err != nil {
		t.Fatalf("committing %s: %v", version, err)
	}
}

// --- OpenKruise CloneSet ---

func newKruiseCloneSet(ns, name string, replicas int64, version string, annotations map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1",
		"kind":       "CloneSet",
		"metadata":   map[string]any{"namespace": ns, "name": name, "annotations": annotations},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": image(version)}}},
			},
			"updateStrategy": map[string]any{"type": "InPlaceIfPossible", "maxUnavailable": "25%"},
		},
	}}
	return u
}

// kruisePilot plays OpenKruise's CloneSet controller: Pods are updated in
// place (they stay ready) while more than the partition are on old
// revisions; a missing Pod is created on the current revision while fewer
// than the partition are on it, else on the update revision. With
// partitionRollback (the CloneSetPartitionRollback gate) it also moves
// updated Pods back in place when the partition rises; without it, never.
func kruisePilot(t *testing.T, ns, name string, partitionRollback bool) {
	t.Helper()
	images := map[string]string{}
	runPilot(t, "Kruise pilot", func(ctx context.Context) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(workload.KruiseCloneSetGVK)
		if err := env.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
			return err
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		img := containers[0].(map[string]any)["image"].(string)
		update := revisionOf(name, corev1.PodSpec{Containers: []corev1.Container{{Image: img}}})
		images[update] = img
		current, _, _ := unstructured.NestedString(u.Object, "status", "currentRevision")
		if current == "" {
			current = update
		}
		replicas64, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		replicas := int32(replicas64)
		partition := int32(0)
		if p, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "updateStrategy", "partition"); found {
			var err error
			if partition, err = step.ResolvePartition(intstr.Parse(toString(p)), replicas); err != nil {
				return err
			}
		}
		pods, err := podsOf(ctx, ns, map[string]string{"app": name})
		if err != nil {
			return err
		}
		if err := ripen(ctx, pods); err != nil {
			return err
		}
		var old, updated []*corev1.Pod
		for i := range pods {
			if pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] == update {
				updated = append(updated, &pods[i])
			} else {
				old = append(old, &pods[i])
			}
		}
		owner := metav1.OwnerReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: name, UID: u.GetUID(), Controller: new(true)}
		oldCount := int32(len(old))
		for range max(replicas-int32(len(pods)), 0) {
			rev := update
			if oldCount < partition {
				rev, oldCount = current, oldCount+1
			}
			if err := env.client.Create(ctx, podOf(ns, "", name+"-", owner, map[string]string{"app": name}, rev, images[rev])); err != nil {
				return err
			}
		}
		move := func(p *corev1.Pod, rev string) error {
			p.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
			p.Spec.Containers[0].Image = images[rev]
			return env.client.Update(ctx, p)
		}
		switch {
		case int32(len(old)) > partition && len(old) > 0:
			if err := move(old[0], update); err != nil {
				return err
			}
		case partitionRollback && int32(len(old)) < partition && len(updated) > 0 && images[current] != "":
			if err := move(updated[0], current); err != nil {
				return err
			}
		}
		st := map[string]any{"observedGeneration": u.GetGeneration(), "replicas": int64(len(pods)), "updateRevision": update, "currentRevision": current}
		var ready, updatedReady int64
		for i := range pods {
			if isReady(&pods[i]) {
				ready++
				if pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] == update {
					updatedReady++
				}
			}
		}
		st["readyReplicas"], st["updatedReplicas"], st["updatedReadyReplicas"] = ready, int64(len(updated)), updatedReady
		if int32(len(updated)) == replicas && updatedReady == int64(replicas) {
			st["currentRevision"] = update
		}
		if previous, _, _ := unstructured.NestedMap(u.Object, "status"); equalJSON(previous, st) {
			return nil
		}
		u.Object["status"] = st
		return env.client.Status().Update(ctx, u)
	})
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// --- observing a rollback ---

// podWatch records the largest number of a workload's Pods unavailable at
// once (not ready, terminating or missing; polled every 20 ms) and every
// distinct message of the Rollout's CanaryRollback condition (from a watch,
// which sees every status write).
type podWatch struct {
	mu              sync.Mutex
	maxUnavailable  int
	rollbackMessage []string
}

func watchRollback(t *testing.T, ns, rollout string, labels map[string]string, replicas int) *podWatch {
	t.Helper()
	w := &podWatch{}
	ctx := testContext(t)
	wc, err := client.NewWithWatch(env.cfg, client.Options{Scheme: env.client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := wc.Watch(ctx, &stepwisev1.RolloutList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer rw.Stop()
		for ev := range rw.ResultChan() {
			ro, ok := ev.Object.(*stepwisev1.Rollout)
			if !ok || ro.Name != rollout {
				continue
			}
			w.mu.Lock()
			if c := condition(ro, stepwisev1.CanaryRollbackCondition); c != nil && !slices.Contains(w.rollbackMessage, c.Message) {
				w.rollbackMessage = append(w.rollbackMessage, c.Message)
			}
			w.mu.Unlock()
		}
	}()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			pods, err := podsOf(ctx, ns, labels)
			if err != nil {
				continue
			}
			unavailable := max(replicas-len(pods), 0)
			for i := range pods {
				if pods[i].DeletionTimestamp != nil || !isReady(&pods[i]) {
					unavailable++
				}
			}
			w.mu.Lock()
			w.maxUnavailable = max(w.maxUnavailable, unavailable)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *podWatch) seen() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxUnavailable, slices.Clone(w.rollbackMessage)
}
