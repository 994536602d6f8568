package analysis

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// Why windows matter here: an in-place update keeps a Pod's name, so a
// series selected by pod=~"{{ .CanaryPods }}" carries on across the update,
// and rate(x[1m]) taken 5 s after it is 55 s of the previous revision and
// 5 s of the new one. A measurement must therefore never read data from
// before the canary became ready on the revision being judged. Two tools
// keep it so: the first measurement waits for the query's Lookback (plus a
// scrape margin), and .CanaryAge lets a window grow with the canary
// instead of reaching past it.

// MaxCanaryAge caps .CanaryAge: a step analysed an hour after its Pods
// became ready judges the last ten minutes, which says more about the
// canary now than an hour-long average, and keeps queries cheap.
const MaxCanaryAge = 10 * time.Minute

// Lookback is how far back from its evaluation time a PromQL expression
// reads, parsed with Prometheus' own parser: for each selector, its range,
// its offset and those of every subquery around it, or the distance back to
// an @ timestamp. Instant selectors count only their offset: they read the
// newest sample, which the scrape margin makes a sample of the canary. A
// negative offset (reading forward) shortens the lookback, never below 0.
func Lookback(query string, evalTime time.Time) (time.Duration, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		return 0, fmt.Errorf("parse PromQL: %w", err)
	}
	var longest time.Duration
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if reach := evalTime.Sub(earliestRead(vs, path, evalTime)); reach > longest {
			longest = reach
		}
		return nil
	})
	return longest, nil
}

// earliestRead is the oldest sample time a selector can read when the
// whole expression is evaluated at evalTime. path holds the selector's
// ancestors, outermost first. Each subquery shifts the time its inner
// expression is evaluated at back by its offset and then spans its range;
// an @ modifier pins the time instead.
func earliestRead(vs *parser.VectorSelector, path []parser.Node, evalTime time.Time) time.Time {
	t := evalTime
	var window time.Duration
	for _, n := range path {
		switch p := n.(type) {
		case *parser.SubqueryExpr:
			if p.Timestamp != nil {
				t = time.UnixMilli(*p.Timestamp)
			}
			t = t.Add(-p.OriginalOffset - p.Range)
		case *parser.MatrixSelector:
			window = p.Range
		}
	}
	if vs.Timestamp != nil {
		t = time.UnixMilli(*vs.Timestamp)
	}
	return t.Add(-vs.OriginalOffset - window)
}

// CanaryAge renders the time from readyAt to now as a PromQL duration for
// .CanaryAge: whole seconds, rounded down so that a window never reaches
// before readyAt, at least 1s (PromQL refuses an empty range) and at most
// MaxCanaryAge.
func CanaryAge(readyAt, now time.Time) string {
	age := now.Sub(readyAt).Truncate(time.Second)
	age = min(max(age, time.Second), MaxCanaryAge)
	return FormatDuration(age)
}

// FormatDuration writes d as PromQL does ("1m30s", "2h"), for queries,
// status and messages.
func FormatDuration(d time.Duration) string {
	return model.Duration(d).String()
}

// WindowCheck is a rendered query measured against the canary it judges.
type WindowCheck struct {
	// Lookback is how far back the query reads (see Lookback).
	Lookback time.Duration
	// Problem says why the query would read data from before readyAt, or
	// that it does not parse; empty when it reads only the canary's data.
	Problem string
}

// CheckWindow tells whether a rendered query, evaluated at now, reads
// only data produced after readyAt, when the canary became ready on the
// revision judged. The first measurement is scheduled so that fixed ranges
// pass; what fails is a window that grows with the canary and also
// reaches past it (an offset added to [{{ .CanaryAge }}]) or an @ timestamp
// from before the update.
func CheckWindow(query string, readyAt, now time.Time) WindowCheck {
	lookback, err := Lookback(query, now)
	if err != nil {
		return WindowCheck{Problem: err.Error()}
	}
	// readyAt is known to the second, as the API server stores times.
	age := now.Sub(readyAt).Truncate(time.Second)
	if lookback > age {
		return WindowCheck{Lookback: lookback, Problem: fmt.Sprintf(
			"the query reads %s back but the canary has been ready for %s only: it would judge data from before the update (bound its windows with {{ .CanaryAge }}, and drop offsets and @ modifiers that reach back)",
			FormatDuration(lookback), FormatDuration(age))}
	}
	return WindowCheck{Lookback: lookback}
}
