package prometheus

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// MaxSeriesValues is how many series' values a vector result keeps (the
// first ones), labels never kept: one per Pod for a compared metric. A
// vector of more series still reports its count in Result.Series.
const MaxSeriesValues = 1000

// errNotAnAnswer is an answer that is not a Prometheus query response:
// not JSON, or JSON of another shape. What it holds is never quoted.
var errNotAnAnswer = errors.New("the answer is not a Prometheus query response")

// answer is what a measurement needs of a query's answer: the API's status
// and error, and the result reduced to its type, its number of series and
// the values of at most MaxSeriesValues series. It is decoded as the body
// streams in (see decodeAnswer), so a vector of thousands of series costs
// at most those values, never a map of labels per series.
type answer struct {
	status, errorType, errorText string
	resultType                   string
	result                       resultSummary
}

// resultSummary is data.result, whatever data.resultType says (the two may
// come in any order).
type resultSummary struct {
	// present: the result was an array.
	present bool
	// series counts the elements that are objects (a vector's or a
	// matrix's series); others those that are not (a scalar's or a
	// string's [time, "value"]), of which pair keeps the first two.
	series, others int
	pair           []json.RawMessage
	// values are the "value"s of the first MaxSeriesValues series, for a
	// compared metric, which judges one value per Pod
	// (pkg/analysis/judge.Samples). Raw, a few dozen bytes each: the
	// bound keeps an answer of any size at a few dozen KiB of them.
	values []json.RawMessage
	// valueless counts series with neither "value" nor "histogram";
	// histograms those with a native histogram.
	valueless, histograms int
}

// decodeAnswer reads one JSON object from r, token by token: envelope keys
// one at a time, data.result one element at a time. Unknown keys (warnings,
// infos, stats) are skipped.
func decodeAnswer(r io.Reader) (*json.Decoder, answer, error) {
	dec := json.NewDecoder(r)
	var a answer
	err := object(dec, func(key string) error {
		switch key {
		case "status":
			return dec.Decode(&a.status)
		case "errorType":
			return dec.Decode(&a.errorType)
		case "error":
			return dec.Decode(&a.errorText)
		case "data":
			return a.decodeData(dec)
		}
		return dec.Decode(&skip{})
	})
	return dec, a, err
}

func (a *answer) decodeData(dec *json.Decoder) error {
	return object(dec, func(key string) error {
		switch key {
		case "resultType":
			return dec.Decode(&a.resultType)
		case "result":
			return a.result.decode(dec)
		}
		return dec.Decode(&skip{})
	})
}

// object walks a JSON object (or null), calling field for each key with
// the decoder before the key's value.
func object(dec *json.Decoder, field func(key string) error) error {
	t, err := dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('{') {
		return errNotAnAnswer
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		if err := field(key); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

func (r *resultSummary) decode(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('[') {
		return errNotAnAnswer
	}
	r.present = true
	for dec.More() {
		var e element
		if err := dec.Decode(&e); err != nil {
			return err
		}
		if !e.object {
			r.others++
			if len(r.pair) < 2 {
				r.pair = append(r.pair, e.raw)
			}
			continue
		}
		r.series++
		switch {
		case e.histogram:
			r.histograms++
		case e.value == nil:
			r.valueless++
		case len(r.values) < MaxSeriesValues:
			r.values = append(r.values, e.value)
		}
	}
	_, err = dec.Token()
	return err
}

// element is one element of data.result. Only a series' "value" and
// whether it has a "histogram" are kept: its labels are skipped unread.
type element struct {
	object    bool
	raw       json.RawMessage
	value     json.RawMessage
	histogram bool
}

func (e *element) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		e.raw = append(json.RawMessage(nil), b...)
		return nil
	}
	var s struct {
		Value     json.RawMessage `json:"value"`
		Histogram present         `json:"histogram"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	e.object, e.value, e.histogram = true, s.Value, bool(s.Histogram)
	return nil
}

// present records that a key was there without keeping its value.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = present(!bytes.Equal(bytes.TrimSpace(b), []byte("null")))
	return nil
}

// skip consumes a value.
type skip struct{}

func (*skip) UnmarshalJSON([]byte) error { return nil }

// toResult reduces a successful answer to an analysis.Result. Shapes that
// cannot be a measurement (a range vector, a string, native histograms)
// become KindOther with their type name, for the Inconclusive message.
func (a answer) toResult() (analysis.Result, error) {
	r := a.result
	if !r.present {
		return analysis.Result{}, errors.New("response holds no result")
	}
	switch a.resultType {
	case "scalar":
		v, ok := pairValue(r.pair)
		if !ok || r.series != 0 || r.others != 2 {
			return analysis.Result{}, errNotAnAnswer
		}
		return analysis.Result{Kind: analysis.KindScalar, Type: a.resultType, Samples: []analysis.Sample{{Value: v}}}, nil
	case "vector":
		switch {
		case r.others != 0 || r.valueless != 0:
			return analysis.Result{}, errNotAnAnswer
		case r.histograms != 0:
			// A native histogram sample has no float value; reading one as
			// 0 could pass a max threshold.
			return analysis.Result{Kind: analysis.KindOther, Type: "vector of native histograms"}, nil
		case r.series == 0:
			return analysis.Result{Kind: analysis.KindVector, Type: a.resultType, Samples: []analysis.Sample{}}, nil
		}
		samples := make([]analysis.Sample, 0, len(r.values))
		for _, raw := range r.values {
			var pair []json.RawMessage
			if json.Unmarshal(raw, &pair) != nil {
				return analysis.Result{}, errNotAnAnswer
			}
			v, ok := pairValue(pair)
			if !ok {
				return analysis.Result{}, errNotAnAnswer
			}
			samples = append(samples, analysis.Sample{Value: v})
		}
		return analysis.Result{Kind: analysis.KindVector, Type: a.resultType, Samples: samples, Series: r.series}, nil
	case "matrix", "string":
		return analysis.Result{Kind: analysis.KindOther, Type: a.resultType}, nil
	}
	return analysis.Result{}, errNotAnAnswer
}

// pairValue reads [time, "value"], the value as Prometheus writes it
// (NaN, +Inf and -Inf included).
func pairValue(pair []json.RawMessage) (float64, bool) {
	if len(pair) != 2 {
		return 0, false
	}
	var (
		ts float64
		s  string
	)
	if json.Unmarshal(pair[0], &ts) != nil || json.Unmarshal(pair[1], &s) != nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}
