package plan

import (
	"fmt"
	"slices"
	"strings"
)

// maxNamedPods bounds the Pod names in Blocked.Message, so the condition
// stays readable on a large CloneSet. Blocked.Pods has them all.
const maxNamedPods = 5

// blocked is called when Pods should move but none could be planned and no
// budget is left. It says so only when the rollout is truly stuck on Pods
// that are not ours: if one of our own updates is still in flight, or a
// Pod is ready and only waiting out minReadySeconds, budget comes back by
// itself and reporting a block would make the condition flap every round.
//
// A Pod created moments ago is not ready either, and is counted here; the
// planner has no clock to tell it from a broken one. The reconciler should
// only warn once Blocked has persisted for a while.
func blocked(pods []Pod, l limits, available int) *Blocked {
	var names []string
	for i := range pods {
		p := &pods[i]
		if p.Terminating {
			continue
		}
		if p.Updating || (p.Ready && !p.Available) {
			return nil
		}
		if !p.Ready && !p.SpecifiedDelete {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	b := &Blocked{
		Unavailable:    int32(max(0, l.replicas-available)),
		MaxUnavailable: int32(l.maxUnavailable),
		Pods:           names,
	}
	listed := strings.Join(names[:min(len(names), maxNamedPods)], ", ")
	if extra := len(names) - maxNamedPods; extra > 0 {
		listed += fmt.Sprintf(" and %d more", extra)
	}
	b.Message = fmt.Sprintf("update cannot progress: %d of %d replicas are unavailable and maxUnavailable is %d, "+
		"so no available Pod may be taken out of service; waiting for Pods that are not ready: %s",
		b.Unavailable, l.replicas, b.MaxUnavailable, listed)
	return b
}
