package cloneset

import (
	"fmt"

	"github.com/stepwise-dev/stepwise/controllers/internal/eventnote"
)

// podActions gathers what a round did to its Pods, so that each kind of
// action is told in one Event naming the Pods, not one Event per Pod
// (package eventnote says why). One Event per Pod also cost the series'
// patches, about 1,050 API writes in the full-size run of
// docs/benchmarks.md, and the recorder kept every Event it was given for
// six minutes (8 MB of a 71 MB live heap at 10,800 Pods).
type podActions struct {
	groups []podActionGroup
}

// podActionGroup is one kind of action: its Event reason and the note
// around the Pods' names (prefix + the Pods + suffix).
type podActionGroup struct {
	reason, prefix, suffix string
	pods                   []string
}

// add records that pod was acted on; the note reads prefix, then the Pod
// or Pods, then suffix ("updating " + "pod web-x" + " in place to ...").
func (e *podActions) add(reason, prefix, pod, suffix string) {
	for i := range e.groups {
		g := &e.groups[i]
		if g.reason == reason && g.prefix == prefix && g.suffix == suffix {
			g.pods = append(g.pods, pod)
			return
		}
	}
	e.groups = append(e.groups, podActionGroup{reason: reason, prefix: prefix, suffix: suffix, pods: []string{pod}})
}

// podEvent is one Event to emit.
type podEvent struct {
	reason, note string
}

// events returns one Event per reason, in the order the round first gave
// each; actions of one reason that differ in their note (updates to two
// revisions, deletions for two causes) share the Event, "; " between them.
// Two Events of one reason from one round would regard the same
// resourceVersion, and the recorder would fold the second into the first.
func (e *podActions) events() []podEvent {
	out := make([]podEvent, 0, len(e.groups))
	index := map[string]int{}
	for _, g := range e.groups {
		note := g.prefix + podsPhrase(g.pods) + g.suffix
		if i, ok := index[g.reason]; ok {
			out[i].note = eventnote.Join(out[i].note, note)
			continue
		}
		index[g.reason] = len(out)
		out = append(out, podEvent{reason: g.reason, note: note})
	}
	return out
}

// podsPhrase names the Pods: "pod a" for one, "3 pods (a, b, c)" for
// more, the list cut as eventnote.List cuts it. A round writes at most
// maxPodsWrittenPerRound Pods, whose names may each be 63 characters.
func podsPhrase(pods []string) string {
	if len(pods) == 1 {
		return "pod " + pods[0]
	}
	return fmt.Sprintf("%d pods (%s)", len(pods), eventnote.List(pods))
}
