package cloneset

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/index"
)

// RevisionLabel is the Pod and ControllerRevision label that names a revision,
// the same key StatefulSets and OpenKruise use so existing tooling reads it.
const RevisionLabel = appsv1.ControllerRevisionHashLabelKey

// revisionSet is what a reconcile knows about a CloneSet's templates.
type revisionSet struct {
	update  *appsv1.ControllerRevision
	current *appsv1.ControllerRevision
	// byName holds every revision that still exists, so a Pod on an older
	// revision can still be compared with its template.
	byName map[string]*appsv1.ControllerRevision
	// collisionCount is the value to store in status.
	collisionCount int32
}

// templateOf decodes the Pod template stored in a revision.
func templateOf(rev *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	template := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(rev.Data.Raw, template); err != nil {
		return nil, fmt.Errorf("decoding template of ControllerRevision %s: %w", rev.Name, err)
	}
	return template, nil
}

// hashTemplate names a template. The collision count is mixed in so a
// (rare) hash collision between different templates gets a new name.
func hashTemplate(data []byte, collisionCount int32) string {
	hasher := fnv.New32a()
	_, _ = hasher.Write(data)
	if collisionCount != 0 {
		_, _ = hasher.Write([]byte(strconv.FormatInt(int64(collisionCount), 10)))
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(hasher.Sum32()), 10))
}

// syncRevisions finds or creates the ControllerRevision for the CloneSet's
// current template, and prunes history beyond revisionHistoryLimit that no
// Pod still uses.
func (r *Reconciler) syncRevisions(ctx context.Context, cs *stepwisev1.CloneSet, pods []*corev1.Pod) (*revisionSet, error) {
	var list appsv1.ControllerRevisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(cs.Namespace), client.MatchingFields{index.RevisionOwner: string(cs.UID)}); err != nil {
		return nil, fmt.Errorf("listing ControllerRevisions: %w", err)
	}
	revisions := make([]*appsv1.ControllerRevision, 0, len(list.Items))
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], cs) {
			revisions = append(revisions, &list.Items[i])
		}
	}
	sort.Slice(revisions, func(i, j int) bool { return revisions[i].Revision < revisions[j].Revision })

	data, err := json.Marshal(cs.Spec.Template)
	if err != nil {
		return nil, fmt.Errorf("encoding pod template: %w", err)
	}
	collisionCount := ptr.Deref(cs.Status.CollisionCount, 0)
	var nextNumber int64 = 1
	if len(revisions) > 0 {
		nextNumber = revisions[len(revisions)-1].Revision + 1
	}

	var update *appsv1.ControllerRevision
	for {
		name := cs.Name + "-" + hashTemplate(data, collisionCount)
		existing := findRevision(revisions, name)
		if existing == nil {
			update, err = r.createRevision(ctx, cs, name, data, nextNumber)
			if err != nil {
				return nil, err
			}
			revisions = append(revisions, update)
			break
		}
		if sameTemplate(existing.Data.Raw, data) {
			// Reverting the template reuses its old revision, so Pods
			// already on it are left alone. Renumbering marks it newest.
			update = existing
			if existing.Revision != revisions[len(revisions)-1].Revision {
				update = existing.DeepCopy()
				update.Revision = nextNumber
				if err := r.Client.Update(ctx, update); err != nil {
					return nil, fmt.Errorf("renumbering ControllerRevision %s: %w", name, err)
				}
			}
			break
		}
		collisionCount++
	}

	set := &revisionSet{update: update, collisionCount: collisionCount, byName: map[string]*appsv1.ControllerRevision{}}
	for _, rev := range revisions {
		set.byName[rev.Name] = rev
	}
	set.byName[update.Name] = update
	set.current = set.byName[cs.Status.CurrentRevision]
	if set.current == nil {
		// A new CloneSet, or its current revision was lost: what it runs now
		// is what it should run.
		set.current = update
	}
	if err := r.truncateHistory(ctx, cs, revisions, set, pods); err != nil {
		return nil, err
	}
	return set, nil
}

// settle makes the revision every Pod runs the current one, when the
// CloneSet runs it whole (its replica count, no Pod mid-update, none
// terminating) and promoted says it may: the governing Rollout, if any,
// made it stable. Until then that Rollout may still abort it (its
// post-promotion analysis runs with every Pod updated), and the partition
// it raises must take the Pods back to the revision before.
//
// It is decided from the Pods each round, not from status alone: a status
// write that would have moved currentRevision can be lost to a template
// change made at the same moment (a GitOps tool applying the next release
// as soon as the last one is Healthy), and the next release's partition
// would then keep its Pods on the revision before the last one, rolling
// the Pods that run the last release back to it.
func (s *revisionSet) settle(pods []*corev1.Pod, replicas int32, isUpdating func(*corev1.Pod) bool, promoted func(string) bool) {
	whole := ""
	var running int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || isUpdating(pod) {
			return
		}
		rev := pod.Labels[RevisionLabel]
		if whole != "" && rev != whole {
			return
		}
		whole = rev
		running++
	}
	if running != replicas || whole == "" || whole == s.current.Name || !promoted(whole) {
		return
	}
	if rev, ok := s.byName[whole]; ok {
		s.current = rev
	}
}

func (r *Reconciler) createRevision(ctx context.Context, cs *stepwisev1.CloneSet, name string, data []byte, number int64) (*appsv1.ControllerRevision, error) {
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: cs.Namespace,
			Labels:    copySelectorLabels(cs),
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
	rev.Labels[RevisionLabel] = name
	if err := controllerutil.SetControllerReference(cs, rev, r.Scheme); err != nil {
		return nil, fmt.Errorf("owning ControllerRevision %s: %w", name, err)
	}
	if err := r.Client.Create(ctx, rev); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The cache has not seen it yet, or another CloneSet made it:
			// read it back and let the loop decide.
			existing := &appsv1.ControllerRevision{}
			if getErr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(rev), existing); getErr != nil {
				return nil, fmt.Errorf("reading existing ControllerRevision %s: %w", name, getErr)
			}
			if metav1.IsControlledBy(existing, cs) && sameTemplate(existing.Data.Raw, data) {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("creating ControllerRevision %s: %w", name, err)
	}
	return rev, nil
}

// truncateHistory deletes the oldest revisions beyond revisionHistoryLimit,
// never the current or update revision or one a live Pod still carries.
func (r *Reconciler) truncateHistory(ctx context.Context, cs *stepwisev1.CloneSet, revisions []*appsv1.ControllerRevision, set *revisionSet, pods []*corev1.Pod) error {
	limit := 10
	if cs.Spec.RevisionHistoryLimit != nil {
		limit = int(*cs.Spec.RevisionHistoryLimit)
	}
	live := map[string]bool{set.update.Name: true, set.current.Name: true}
	for _, pod := range pods {
		live[pod.Labels[RevisionLabel]] = true
	}
	var history []*appsv1.ControllerRevision
	for _, rev := range revisions {
		if !live[rev.Name] {
			history = append(history, rev)
		}
	}
	for i := 0; i < len(history)-limit; i++ {
		if err := r.Client.Delete(ctx, history[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old ControllerRevision %s: %w", history[i].Name, err)
		}
		delete(set.byName, history[i].Name)
	}
	return nil
}

func findRevision(revisions []*appsv1.ControllerRevision, name string) *appsv1.ControllerRevision {
	for _, rev := range revisions {
		if rev.Name == name {
			return rev
		}
	}
	return nil
}

// sameTemplate compares decoded templates, so key order and whitespace in
// stored JSON never split one template into two revisions.
func sameTemplate(a, b []byte) bool {
	var ta, tb corev1.PodTemplateSpec
	if json.Unmarshal(a, &ta) != nil || json.Unmarshal(b, &tb) != nil {
		return false
	}
	return apiequality.Semantic.DeepEqual(ta, tb)
}

func copySelectorLabels(cs *stepwisev1.CloneSet) map[string]string {
	labels := map[string]string{}
	if cs.Spec.Selector != nil {
		for k, v := range cs.Spec.Selector.MatchLabels {
			labels[k] = v
		}
	}
	return labels
}
