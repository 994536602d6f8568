package prometheus

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func TestDecodeAnswer(t *testing.T) {
	const ts = `1700000000.123`
	series := func(labels, value string) string {
		return `{"metric":` + labels + `,"value":[` + ts + `,"` + value + `"]}`
	}
	vector := func(elems ...string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(elems, ",") + `]}}`
	}
	tests := []struct {
		name      string
		body      string
		wantKind  analysis.Kind
		wantType  string
		wantN     int
		wantValue float64
		wantErr   error
	}{
		{name: "scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[` + ts + `,"0.5"]}}`,
			wantKind: analysis.KindScalar, wantType: "scalar", wantN: 1, wantValue: 0.5},
		{name: "result before its type, warnings and unknown keys skipped",
			body:     `{"data":{"result":[` + series(`{"pod":"web-0"}`, "2") + `],"stats":{"x":[1,2]},"resultType":"vector"},"warnings":["w"],"status":"success","infos":["i"]}`,
			wantKind: analysis.KindVector, wantType: "vector", wantN: 1, wantValue: 2},
		{name: "empty vector", body: vector(), wantKind: analysis.KindVector, wantType: "vector"},
		{name: "several series are counted, every value kept in order",
			body:     vector(series(`{"pod":"a"}`, "1"), series(`{"pod":"b"}`, "2"), series(`{}`, "3")),
			wantKind: analysis.KindVector, wantType: "vector", wantN: 3, wantValue: 1},
		{name: "NaN is a value for Evaluate to judge", body: vector(series(`{}`, "NaN")), wantKind: analysis.KindVector, wantType: "vector", wantN: 1, wantValue: math.NaN()},
		{name: "+Inf", body: vector(series(`{}`, "+Inf")), wantKind: analysis.KindVector, wantType: "vector", wantN: 1, wantValue: math.Inf(1)},
		{name: "native histograms cannot be a value",
			body:     vector(`{"metric":{},"histogram":[` + ts + `,{"count":"3","sum":"1"}]}`),
			wantKind: analysis.KindOther, wantType: "vector of native histograms"},
		{name: "a histogram among float series", body: vector(series(`{}`, "1"), `{"metric":{},"histogram":[1,{}]}`),
			wantKind: analysis.KindOther, wantType: "vector of native histograms"},
		{name: "matrix", body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"2"]]}]}}`,
			wantKind: analysis.KindOther, wantType: "matrix"},
		{name: "string", body: `{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}`,
			wantKind: analysis.KindOther, wantType: "string"},
		{name: "an unknown type", body: `{"status":"success","data":{"resultType":"<script>","result":[]}}`, wantErr: errNotAnAnswer},
		{name: "no result", body: `{"status":"success","data":{"resultType":"vector"}}`, wantErr: errors.New("response holds no result")},
		{name: "null data", body: `{"status":"success","data":null}`, wantErr: errors.New("response holds no result")},
		{name: "a value that is not a number", body: vector(series(`{}`, "ten")), wantErr: errNotAnAnswer},
		{name: "a value that is not quoted", body: `{"status":"success","data":{"resultType":"vector","result":[{"value":[1,2]}]}}`, wantErr: errNotAnAnswer},
		{name: "a series without value", body: vector(`{"metric":{}}`), wantErr: errNotAnAnswer},
		{name: "a vector of numbers", body: `{"status":"success","data":{"resultType":"vector","result":[1,"2"]}}`, wantErr: errNotAnAnswer},
		{name: "a scalar of three", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"2","3"]}}`, wantErr: errNotAnAnswer},
		{name: "a scalar of series", body: `{"status":"success","data":{"resultType":"scalar","result":[{"value":[1,"1"]}]}}`, wantErr: errNotAnAnswer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, a, err := decodeAnswer(strings.NewReader(tt.body))
			if err != nil {
				t.Fatalf("decodeAnswer() error = %v", err)
			}
			got, err := a.toResult()
			if tt.wantErr != nil {
				if err == nil || err.Error() != tt.wantErr.Error() {
					t.Fatalf("toResult() = %+v, %v; want error %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("toResult() error = %v", err)
			}
			if got.Kind != tt.wantKind || got.Type != tt.wantType || got.SeriesCount() != tt.wantN {
				t.Fatalf("toResult() = %+v, want kind %q type %q with %d series", got, tt.wantKind, tt.wantType, tt.wantN)
			}
			if tt.wantN > 0 {
				v := got.Samples[0].Value
				if v != tt.wantValue && !(math.IsNaN(v) && math.IsNaN(tt.wantValue)) {
					t.Errorf("value = %v, want %v", v, tt.wantValue)
				}
				if want := min(tt.wantN, MaxSeriesValues); len(got.Samples) != want {
					t.Errorf("%d samples kept, want %d", len(got.Samples), want)
				}
				for i, s := range got.Samples {
					if tt.wantN > 1 && s.Value != float64(i+1) {
						t.Errorf("sample %d = %v, want %d (in the answer's order)", i, s.Value, i+1)
					}
				}
			}
		})
	}
}

// What is not a JSON object of the API's shape is refused while decoding.
func TestDecodeAnswerRefusesOtherShapes(t *testing.T) {
	for _, body := range []string{
		`<html>welcome</html>`,
		`[1,2]`,
		`{"status":"success","data":[1]}`,
		`{"status":"success","data":{"resultType":"vector","result":{"a":1}}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]}`,
		`{"status":{"nested":true}}`,
	} {
		_, _, err := decodeAnswer(strings.NewReader(body))
		if err == nil {
			t.Errorf("decodeAnswer(%s) succeeded", body)
		}
	}
}
