package plan

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// sorter orders Pods for update from the CloneSet's priority and scatter
// strategies. Selectors are parsed once, not once per comparison.
type sorter struct {
	weights []weightTerm
	order   []string
	scatter v1alpha1.UpdateScatterStrategy
}

type weightTerm struct {
	weight   int64
	selector labels.Selector
}

// priorityKey ranks a Pod; smaller first. For weightPriority a is minus the
// summed weight; for orderPriority a is the index of the first key the Pod
// carries (no key: after all keys) and b minus its value, because Kruise
// updates the largest value first and manifests port unchanged.
type priorityKey struct{ a, b int64 }

func (k priorityKey) compare(o priorityKey) int {
	if k.a != o.a {
		return cmp.Compare(k.a, o.a)
	}
	return cmp.Compare(k.b, o.b)
}

func newSorter(priority *v1alpha1.UpdatePriorityStrategy, scatter v1alpha1.UpdateScatterStrategy) sorter {
	s := sorter{scatter: scatter}
	if priority == nil {
		return s
	}
	// The API forbids setting both; if both come anyway, weight wins, as
	// in Kruise.
	if len(priority.WeightPriority) > 0 {
		for _, t := range priority.WeightPriority {
			sel, err := metav1.LabelSelectorAsSelector(&t.MatchSelector)
			if err != nil {
				// The API server validated the CloneSet, not the
				// selector's semantics; a bad term simply matches nothing.
				continue
			}
			s.weights = append(s.weights, weightTerm{weight: int64(t.Weight), selector: sel})
		}
		return s
	}
	for _, t := range priority.OrderPriority {
		s.order = append(s.order, t.OrderedKey)
	}
	return s
}

func (s sorter) priority(podLabels map[string]string) priorityKey {
	if len(s.weights) > 0 {
		var sum int64
		set := labels.Set(podLabels)
		for _, t := range s.weights {
			if t.selector.Matches(set) {
				sum += t.weight
			}
		}
		return priorityKey{a: -sum}
	}
	for i, key := range s.order {
		if n, ok := orderValue(podLabels[key]); ok {
			return priorityKey{a: int64(i), b: -n}
		}
	}
	return priorityKey{a: int64(len(s.order))}
}

// orderValue reads an orderPriority label: an integer, or the integer a
// value ends with ("rack-3" is 3), as Kruise reads it. A value with no
// number does not rank the Pod by that key.
func orderValue(v string) (int64, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, true
	}
	digits := strings.TrimRightFunc(v, func(r rune) bool { return r >= '0' && r <= '9' })
	n, err := strconv.ParseInt(v[len(digits):], 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// readiness ranks how cheap a Pod is to touch: not ready, then ready but
// not yet available (minReadySeconds), then available. Only the last costs
// budget.
func readiness(p *Pod) int {
	switch {
	case !p.Ready:
		return 0
	case !p.Available:
		return 1
	default:
		return 2
	}
}

// updateOrder sorts candidates for Update: Pods that are unavailable anyway
// first (they cost no budget), then by priority, then by name; then, within
// each run of equal readiness and priority, Pods matching a scatter term are
// spread across the run. Scatter never overrides priority or readiness.
func (s sorter) updateOrder(cands []*podState) []*podState {
	keys := make(map[*podState]priorityKey, len(cands))
	for _, c := range cands {
		keys[c] = s.priority(c.pod.Labels)
	}
	out := slices.Clone(cands)
	slices.SortStableFunc(out, func(x, y *podState) int {
		if d := readiness(x.pod) - readiness(y.pod); d != 0 {
			return d
		}
		if d := keys[x].compare(keys[y]); d != 0 {
			return d
		}
		return strings.Compare(x.pod.Name, y.pod.Name)
	})
	if len(s.scatter) == 0 {
		return out
	}
	for start := 0; start < len(out); {
		end := start + 1
		for end < len(out) && readiness(out[end].pod) == readiness(out[start].pod) && keys[out[end]] == keys[out[start]] {
			end++
		}
		copy(out[start:end], s.scatterRun(out[start:end]))
		start = end
	}
	return out
}

// rollbackOrder sorts candidates for Rollback: unavailable Pods first again,
// and within each readiness class the reverse of the update order, so that
// lowering and raising the partition moves the same Pods: the ones updated
// first are rolled back last.
func (s sorter) rollbackOrder(cands []*podState) []*podState {
	out := s.updateOrder(cands)
	for start := 0; start < len(out); {
		end := start + 1
		for end < len(out) && readiness(out[end].pod) == readiness(out[start].pod) {
			end++
		}
		slices.Reverse(out[start:end])
		start = end
	}
	return out
}

// scatterRun applies the scatter terms to one run. Terms are applied from
// last to first, so the first term, applied last, is spread exactly and the
// others as well as it leaves room for.
func (s sorter) scatterRun(run []*podState) []*podState {
	for i := len(s.scatter) - 1; i >= 0; i-- {
		run = spread(run, s.scatter[i])
	}
	return run
}

// spread places the m Pods matching term evenly among the n Pods of seq: the
// k-th matching Pod goes to the middle of the k-th of m equal slices. The
// relative order of matching Pods, and of the others, is kept. With a
// budget of b Pods per round, each round then updates about b*m/n matching
// Pods instead of all of them first.
func spread(seq []*podState, term v1alpha1.UpdateScatterTerm) []*podState {
	var matched, others []*podState
	for _, p := range seq {
		if v, ok := p.pod.Labels[term.Key]; ok && v == term.Value {
			matched = append(matched, p)
		} else {
			others = append(others, p)
		}
	}
	m, n := len(matched), len(seq)
	if m == 0 || m == n {
		return seq
	}
	out := make([]*podState, n)
	for k, p := range matched {
		// Slices are n/m >= 1 wide, so these positions are distinct and < n.
		out[(2*k+1)*n/(2*m)] = p
	}
	next := 0
	for i := range out {
		if out[i] == nil {
			out[i] = others[next]
			next++
		}
	}
	return out
}

// deletionOrder sorts candidates for scale-down, cheapest loss first:
// unscheduled, not ready, not yet available; then Pods on a third revision
// (wanted nowhere); then the youngest, whose loss costs the least warm
// state; then by name for a stable plan. Which revision may lose Pods at all
// is decided by the caller's per-revision caps, not here.
func deletionOrder(cands []*podState) []*podState {
	out := slices.Clone(cands)
	slices.SortStableFunc(out, func(x, y *podState) int {
		if x.pod.Scheduled != y.pod.Scheduled {
			return boolFirst(!x.pod.Scheduled)
		}
		if d := readiness(x.pod) - readiness(y.pod); d != 0 {
			return d
		}
		if (x.bucket == bucketStale) != (y.bucket == bucketStale) {
			return boolFirst(x.bucket == bucketStale)
		}
		if c := y.pod.CreationTimestamp.Compare(x.pod.CreationTimestamp); c != 0 {
			return c
		}
		return strings.Compare(x.pod.Name, y.pod.Name)
	})
	return out
}

// boolFirst returns -1 when the left element should go first, else 1.
func boolFirst(leftFirst bool) int {
	if leftFirst {
		return -1
	}
	return 1
}
