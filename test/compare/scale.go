package compare

import (
	"bufio"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The scale benchmark (make bench-scale) watches many Rollouts step and
// samples the manager's and Prometheus' own /metrics over time. What it
// computes from those observations lives here, pure, so that it is tested
// without a cluster.

// Percentile is the p-th percentile (0..100) of ds by the nearest-rank
// method: the smallest value with at least p% of the values at or below
// it. 0 for an empty list.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Thresholds records, for a count that grows, the first moment it reached
// each value: First(k) is when k was first reached. A count that falls and
// rises again keeps its first moments.
type Thresholds struct {
	at []time.Time // at[k-1]: first time the count was >= k
}

// Observe records the count seen at a moment.
func (t *Thresholds) Observe(count int, at time.Time) {
	for len(t.at) < count {
		t.at = append(t.at, at)
	}
}

// First is when the count first reached k (k >= 1); ok is false when it
// never did.
func (t *Thresholds) First(k int) (time.Time, bool) {
	if k < 1 || k > len(t.at) {
		return time.Time{}, false
	}
	return t.at[k-1], true
}

// Sample is one scrape of counters and gauges, keyed by SeriesKey.
type Sample struct {
	At     time.Time
	Values map[string]float64
}

// SumSeries reads a Prometheus text exposition and sums, per wanted
// metric, the samples whose labels contain every one of its matchers
// (`name="value"` strings). wanted maps a result key to the metric name and
// matchers.
func SumSeries(r io.Reader, wanted map[string]SeriesMatch) (map[string]float64, error) {
	out := make(map[string]float64, len(wanted))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		for key, m := range wanted {
			if name != m.Metric || !m.matches(line) {
				continue
			}
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err != nil {
				continue
			}
			out[key] += v
		}
	}
	return out, sc.Err()
}

// SeriesMatch picks series of one metric by label matchers such as
// `controller="cloneset"`.
type SeriesMatch struct {
	Metric string
	Labels []string
}

func (m SeriesMatch) matches(line string) bool {
	for _, l := range m.Labels {
		if !strings.Contains(line, l) {
			return false
		}
	}
	return true
}

// RatePoint is a counter's rate over one interval between two samples.
type RatePoint struct {
	From, To time.Time
	PerSec   float64
}

// Rates turns the counter key of consecutive samples into per-second
// rates; a counter that went down (a restart) counts from zero.
func Rates(samples []Sample, key string) []RatePoint {
	var out []RatePoint
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dt := b.At.Sub(a.At).Seconds()
		if dt <= 0 {
			continue
		}
		d := b.Values[key] - a.Values[key]
		if d < 0 {
			d = b.Values[key]
		}
		out = append(out, RatePoint{From: a.At, To: b.At, PerSec: d / dt})
	}
	return out
}

// MaxRate is the highest rate of points; MeanRate the counter's increase
// over the whole series per second.
func MaxRate(points []RatePoint) float64 {
	m := 0.0
	for _, p := range points {
		m = max(m, p.PerSec)
	}
	return m
}

// MeanRate is the average rate over the points' whole span.
func MeanRate(points []RatePoint) float64 {
	var secs float64
	for _, p := range points {
		secs += p.To.Sub(p.From).Seconds()
	}
	if secs == 0 {
		return 0
	}
	return Increase(points) / secs
}

// Increase is the counter's increase over the points' whole span, a
// restart counted from zero as Rates does.
func Increase(points []RatePoint) float64 {
	var total float64
	for _, p := range points {
		total += p.PerSec * p.To.Sub(p.From).Seconds()
	}
	return total
}

// GoMemory is what the Go runtime held, in bytes, from its own metrics
// (controller-runtime serves all of runtime/metrics): the heap's objects,
// the live heap the last collection marked, the goal of the next one, free
// heap not yet returned to the OS, unused room in the heap's spans, and
// the rest it maps (stacks, the collector's metadata, other runtime).
type GoMemory struct {
	HeapObjects, HeapLive, HeapGoal, HeapFree, HeapUnused, Other float64
	// PeakLive is the highest live heap over all the samples.
	PeakLive float64
}

// GoMemorySeries are the series GoMemoryAtPeak reads, keyed as it reads
// them; add them to what a sampler scrapes.
var GoMemorySeries = map[string]SeriesMatch{
	"go_heap_objects":  {Metric: "go_memory_classes_heap_objects_bytes"},
	"go_heap_live":     {Metric: "go_gc_heap_live_bytes"},
	"go_heap_goal":     {Metric: "go_gc_heap_goal_bytes"},
	"go_heap_free":     {Metric: "go_memory_classes_heap_free_bytes"},
	"go_heap_unused":   {Metric: "go_memory_classes_heap_unused_bytes"},
	"go_heap_released": {Metric: "go_memory_classes_heap_released_bytes"},
	"go_total":         {Metric: "go_memory_classes_total_bytes"},
}

// GoMemoryAtPeak is the Go runtime's memory at the sample where rssKey
// (the process's anonymous RSS) was highest, the first such sample on a
// tie; ok is false when no sample holds the runtime's series. Other is
// what the runtime maps beyond the heap: its total less the heap (objects,
// free, unused) and the part already returned to the OS.
func GoMemoryAtPeak(samples []Sample, rssKey string) (m GoMemory, ok bool) {
	var at *Sample
	for i := range samples {
		s := &samples[i]
		m.PeakLive = max(m.PeakLive, s.Values["go_heap_live"])
		if s.Values["go_total"] == 0 {
			continue
		}
		if at == nil || s.Values[rssKey] > at.Values[rssKey] {
			at = s
		}
	}
	if at == nil {
		return m, false
	}
	v := at.Values
	m.HeapObjects, m.HeapLive, m.HeapGoal = v["go_heap_objects"], v["go_heap_live"], v["go_heap_goal"]
	m.HeapFree, m.HeapUnused = v["go_heap_free"], v["go_heap_unused"]
	m.Other = v["go_total"] - v["go_heap_released"] - m.HeapObjects - m.HeapFree - m.HeapUnused
	return m, true
}

// CloneSetCounts is what one CloneSet's object says of its update.
type CloneSetCounts struct {
	Generation, ObservedGeneration  int64
	Replicas, Ready, UpdatedReady   int32
	CurrentRevision, UpdateRevision string
}

// UpdateProgress counts the CloneSets not yet all updated and ready, and
// their Pods updated and ready. A status that has not observed the latest
// generation counts none of its Pods: right after an image patch it still
// counts the old revision's Pods as updated and ready (a full-size run's
// first sample read 3000 of 10,000 big Pods done that way).
func UpdateProgress(sets []CloneSetCounts) (left int, updatedReady int32) {
	for _, cs := range sets {
		if cs.ObservedGeneration != cs.Generation {
			left++
			continue
		}
		updatedReady += cs.UpdatedReady
		if cs.UpdatedReady != cs.Replicas || cs.Ready != cs.Replicas || cs.CurrentRevision != cs.UpdateRevision {
			left++
		}
	}
	return left, updatedReady
}
