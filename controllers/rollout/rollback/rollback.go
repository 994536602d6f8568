package rollback

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/controllers/internal/eventnote"
)

// Pod is what the plan reads of one Pod of the workload.
type Pod struct {
	Name string
	// UID is the Pod deleted: a Pod recreated under the same name (a
	// StatefulSet's) is another Pod.
	UID types.UID
	// Ordinal is the StatefulSet ordinal of the name ("web-3": 3), -1 when
	// the name has none.
	Ordinal int
	// Revision is the Pod's controller-revision-hash label.
	Revision string
	// Available is Ready for at least the workload's minReadySeconds.
	Available bool
	// Terminating is true once the Pod has a deletion timestamp.
	Terminating bool
}

// Input is everything Decide reads.
type Input struct {
	// Pods are the Pods the workload controls.
	Pods []Pod
	// Replicas is the workload's spec.replicas.
	Replicas int32
	// Target is the revision the workload recreates a deleted Pod on: its
	// status.currentRevision, for a partition that covers every Pod.
	Target string
	// Stable is the Rollout's stable revision. Pods are deleted only when it
	// is Target, or they would come back on a revision the Rollout never
	// called stable.
	Stable string
	// Settled is true when the workload has observed its spec and that spec
	// keeps every Pod on Target (partition = replicas): before that, a
	// deleted Pod could come back on the update revision.
	Settled bool
	// MaxUnavailable is the workload's update budget in Pods, at least 1.
	MaxUnavailable int32
	// SetName is the StatefulSet's name, whose Pods are "<SetName>-<ordinal>"
	// for ordinals 0 to Replicas-1, to name the missing ones in messages;
	// empty for workloads whose Pod names are random.
	SetName string
	// InPlace is true for a workload that moves its canary Pods back by
	// itself once the partition rises (workload.Observation.RollsBack):
	// nothing is deleted, and the plan only reports what is left.
	InPlace bool
}

// Plan is what Decide asks for.
type Plan struct {
	// Canaries are the Pods off Target that are not terminating yet, in the
	// order they are rolled back: unavailable ones first (deleting them
	// costs no availability), then the highest ordinal, then by name.
	Canaries []Pod
	// Delete are the canaries to delete now: every unavailable one, then
	// available ones while fewer than MaxUnavailable Pods are unavailable.
	Delete []Pod
	// Waiting are the names of the Pods that are not available (terminating
	// or not ready), sorted.
	Waiting []string
	// Missing is how many Pods Replicas asks for beyond those that exist.
	Missing int32
	// MissingNames names them, for a StatefulSet (Input.SetName).
	MissingNames []string
	// Blocked says why nothing is deleted although canaries remain; empty
	// when deletions are only limited by the budget.
	Blocked string
	// Target is Input.Target, for messages.
	Target string
	// InPlace is Input.InPlace, for messages.
	InPlace bool
}

// Done reports whether every Pod is on Target, present and available.
func (p Plan) Done() bool {
	return len(p.Canaries) == 0 && len(p.Waiting) == 0 && p.Missing == 0
}

// Decide returns which canary Pods to delete now.
func Decide(in Input) Plan {
	p := Plan{Target: in.Target, InPlace: in.InPlace}
	for _, pod := range in.Pods {
		if pod.Terminating || !pod.Available {
			p.Waiting = append(p.Waiting, pod.Name)
		}
		if !pod.Terminating && pod.Revision != in.Target {
			p.Canaries = append(p.Canaries, pod)
		}
	}
	slices.Sort(p.Waiting)
	// A terminating Pod still stands in for the one to be created after it.
	p.Missing = max(in.Replicas-int32(len(in.Pods)), 0)
	if in.SetName != "" && p.Missing > 0 {
		present := map[string]bool{}
		for _, pod := range in.Pods {
			present[pod.Name] = true
		}
		for ord := range in.Replicas {
			if name := in.SetName + "-" + strconv.Itoa(int(ord)); !present[name] {
				p.MissingNames = append(p.MissingNames, name)
			}
		}
	}
	slices.SortFunc(p.Canaries, func(a, b Pod) int {
		if a.Available != b.Available {
			if !a.Available {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.Ordinal, a.Ordinal); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	if len(p.Canaries) == 0 || in.InPlace {
		return p
	}
	switch {
	case in.Target == "":
		p.Blocked = "the workload reports no current revision"
		return p
	case in.Target != in.Stable:
		p.Blocked = fmt.Sprintf("the workload's current revision %s is not the stable revision %s, so a deleted Pod would not come back on it", in.Target, in.Stable)
		return p
	case !in.Settled:
		p.Blocked = "waiting for the workload to observe the partition that keeps every Pod on the stable revision"
		return p
	}
	budget := max(in.MaxUnavailable, 1) - int32(len(p.Waiting)) - p.Missing
	for _, pod := range p.Canaries {
		switch {
		case !pod.Available:
			// Unavailable already: deleting it costs nothing.
			p.Delete = append(p.Delete, pod)
		case budget > 0:
			p.Delete = append(p.Delete, pod)
			budget--
		}
	}
	return p
}

// Message says what the rollback is doing, for the Rollout's status:
// "rolling back 2 canary Pods to revision web-1: web-3 deleted, waiting for
// it to be ready". Each list of names ends in "and N more" past about 600
// characters (eventnote.List): a round of a large workload's budget would
// otherwise put hundreds of names in a condition.
func (p Plan) Message() string {
	if p.Done() {
		return fmt.Sprintf("every Pod is back on revision %s", p.Target)
	}
	how := ""
	if p.InPlace {
		how = " in place"
	}
	head := fmt.Sprintf("rolling back %s%s to revision %s", count(len(p.Canaries), "canary Pod"), how, p.Target)
	switch {
	case len(p.Canaries) == 0 && p.InPlace:
		head = fmt.Sprintf("canary Pods back in place on revision %s", p.Target)
	case len(p.Canaries) == 0:
		head = fmt.Sprintf("canary Pods deleted, coming back on revision %s", p.Target)
	}
	if p.Blocked != "" {
		return head + ": " + p.Blocked
	}
	var deleted []string
	for _, pod := range p.Delete {
		deleted = append(deleted, pod.Name)
	}
	if len(deleted) > 0 {
		it := "it"
		if len(deleted) > 1 {
			it = "them"
		}
		return fmt.Sprintf("%s: %s deleted, waiting for %s to be ready", head, eventnote.List(deleted), it)
	}
	var waits []string
	if len(p.Waiting) > 0 {
		waits = append(waits, eventnote.List(p.Waiting)+" to be ready")
	}
	switch {
	case len(p.MissingNames) > 0:
		waits = append(waits, eventnote.List(p.MissingNames)+" to be created")
	case p.Missing > 0:
		waits = append(waits, count(int(p.Missing), "missing Pod")+" to be created")
	}
	if len(waits) == 0 {
		// In place, before the workload has moved any of them.
		return head + ": waiting for the workload to update them"
	}
	return fmt.Sprintf("%s: waiting for %s", head, strings.Join(waits, " and "))
}

// DoneMessage is Message once Done, with how long the rollback took since
// it began (the abort): the figure that tells an in-place rollback from a
// recreating one.
func (p Plan) DoneMessage(took time.Duration) string {
	how := ""
	if p.InPlace {
		how = " in place"
	}
	// The start is a condition's transition time, kept to the second.
	after := took.Round(time.Second).String()
	if took < time.Second {
		after = "under 1s"
	}
	return fmt.Sprintf("every Pod is back on revision %s%s, %s after the rollback began", p.Target, how, after)
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// FromPods reads Pods as Decide sees them. setName is the workload's name,
// from which a StatefulSet names its Pods "<setName>-<ordinal>".
func FromPods(pods []*corev1.Pod, setName string, revisionLabel string, minReadySeconds int32, now time.Time) []Pod {
	out := make([]Pod, 0, len(pods))
	for _, pod := range pods {
		out = append(out, Pod{
			Name:        pod.Name,
			UID:         pod.UID,
			Ordinal:     Ordinal(pod.Name, setName),
			Revision:    pod.Labels[revisionLabel],
			Available:   Available(pod, minReadySeconds, now),
			Terminating: pod.DeletionTimestamp != nil,
		})
	}
	return out
}

// Ordinal reads the ordinal of a StatefulSet Pod's name; -1 when the name
// is not "<setName>-<digits>".
func Ordinal(podName, setName string) int {
	rest, ok := strings.CutPrefix(podName, setName+"-")
	if !ok || rest == "" || strings.TrimLeft(rest, "0123456789") != "" {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return -1
	}
	return n
}

// Available is a Pod that has been Ready for at least minReadySeconds, as
// workload controllers count it.
func Available(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		if c.Status != corev1.ConditionTrue {
			return false
		}
		if minReadySeconds == 0 {
			return true
		}
		return !c.LastTransitionTime.IsZero() && !c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).After(now)
	}
	return false
}

// DeletedNote is the note of the one CanaryPodDeleted Event of a round
// that deleted pods, workload ("StatefulSet db") being who recreates them
// on revision target: "deleted canary Pod db-3 (revision db-2) so that
// StatefulSet db recreates it on stable revision db-1", or for several
// "deleted 2 canary Pods (db-3, db-2) (revision db-2) ... recreates them
// ...", one phrase per canary revision. One Event per Pod would regard the
// Rollout at one resourceVersion, and the recorder would fold all but the
// first into a count (see package eventnote).
func DeletedNote(pods []Pod, workload, target string) string {
	var revisions []string
	byRevision := map[string][]string{}
	for _, pod := range pods {
		if _, ok := byRevision[pod.Revision]; !ok {
			revisions = append(revisions, pod.Revision)
		}
		byRevision[pod.Revision] = append(byRevision[pod.Revision], pod.Name)
	}
	note := ""
	for _, revision := range revisions {
		names := byRevision[revision]
		phrase := fmt.Sprintf("deleted canary Pod %s (revision %s) so that %s recreates it on stable revision %s",
			names[0], revision, workload, target)
		if len(names) > 1 {
			phrase = fmt.Sprintf("deleted %d canary Pods (%s) (revision %s) so that %s recreates them on stable revision %s",
				len(names), eventnote.List(names), revision, workload, target)
		}
		note = eventnote.Join(note, phrase)
	}
	return note
}
