package analysis

import (
	"context"
)

// Provider runs one instant query against a metrics backend.
//
// Implementations return an error only when no result could be obtained
// (transport, authentication, timeout, a rejected query); a result that is
// present but unusable (empty, NaN, several series) is returned as a Result
// and judged by Evaluate, so the two cases stay distinguishable.
type Provider interface {
	Query(ctx context.Context, query string) (Result, error)
}

// Kind is the shape of a query result, reduced to what Evaluate cares about.
type Kind string

const (
	// KindScalar is a single number without labels.
	KindScalar Kind = "scalar"
	// KindVector is a set of labelled series with one value each.
	KindVector Kind = "vector"
	// KindOther is any shape that cannot be a measurement (a range vector,
	// a string, native histograms); Result.Type names it.
	KindOther Kind = "other"
)

// Sample is one value of a result, with its series labels (none for a
// scalar).
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Result is a provider-neutral query result.
type Result struct {
	Kind Kind
	// Samples holds the single value of a scalar or one entry per series of a
	// vector. It is empty for KindOther.
	Samples []Sample
	// Series, when set, is the number of series of a vector whose Samples
	// holds only the first: Evaluate reads one value and the count, so a
	// provider need not keep thousands of series in memory to say how many
	// came back. Zero means len(Samples).
	Series int
	// Type is the backend's own name of the result type (for example
	// "matrix" or "string"). It is only informative, so that an
	// Inconclusive message can say what came back instead.
	Type string
}

// Measure runs query through p and evaluates the result against threshold.
//
// A provider error becomes an Error measurement rather than a Go error: the
// analysis counts errors (see Limits.ConsecutiveErrorLimit) instead of
// failing the reconcile, and the message is what ends up in status.
// The query must already be rendered (see Render).
func Measure(ctx context.Context, p Provider, query string, threshold Threshold) Measurement {
	// Check the threshold before spending a query on a measurement that
	// cannot be judged anyway.
	if err := threshold.Validate(); err != nil {
		return Measurement{Phase: PhaseError, Message: err.Error()}
	}
	result, err := p.Query(ctx, query)
	if err != nil {
		return Measurement{Phase: PhaseError, Message: "query failed: " + err.Error()}
	}
	return Evaluate(result, threshold)
}

// SeriesCount is the number of series (or values of a scalar) the result
// holds: Series when set, else len(Samples).
func (r Result) SeriesCount() int {
	if r.Series > 0 {
		return r.Series
	}
	return len(r.Samples)
}
