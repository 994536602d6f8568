package inplace

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func podWithAnnotations(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
}

func TestParseState(t *testing.T) {
	tests := []struct {
		name    string
		raw     *string
		want    *State
		corrupt bool
	}{
		{name: "absent", raw: nil, want: nil},
		{
			name: "valid",
			raw:  ptrTo(`{"revision":"r2","updateTimestamp":"2026-03-01T12:00:00Z","lastContainerStatuses":{"app":{"imageID":"id1"}},"pendingBatches":[["app"]],"pendingImages":{"app":"app:v2"},"updatedContainers":["sidecar"]}`),
			want: &State{
				Revision:              "r2",
				UpdateTimestamp:       metav1.NewTime(epoch),
				LastContainerStatuses: map[string]ContainerRecord{"app": {ImageID: "id1"}},
				PendingBatches:        [][]string{{"app"}},
				PendingImages:         map[string]string{"app": "app:v2"},
				UpdatedContainers:     []string{"sidecar"},
			},
		},
		{name: "not_json", raw: ptrTo(`{"revision":`), corrupt: true},
		{name: "wrong_type", raw: ptrTo(`{"revision":3}`), corrupt: true},
		{name: "empty_string", raw: ptrTo(``), corrupt: true},
		{name: "no_revision", raw: ptrTo(`{}`), corrupt: true},
		{name: "pending_without_image", raw: ptrTo(`{"revision":"r2","pendingBatches":[["app"]]}`), corrupt: true},
		{name: "empty_batch", raw: ptrTo(`{"revision":"r2","pendingBatches":[[]]}`), corrupt: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			annotations := map[string]string{}
			if tc.raw != nil {
				annotations[v1alpha1.InPlaceUpdateStateAnnotation] = *tc.raw
			}
			got, err := ParseState(podWithAnnotations(annotations))
			if tc.corrupt {
				if !errors.Is(err, ErrCorruptState) || got != nil {
					t.Fatalf("ParseState = %+v, %v; want nil, ErrCorruptState", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseState: %v", err)
			}
			if !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("ParseState = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	pod := podWithAnnotations(nil)
	state := &State{Revision: "r2", UpdateTimestamp: metav1.NewTime(epoch), PendingBatches: [][]string{{"a"}}, PendingImages: map[string]string{"a": "a:2"}}
	grace := &Grace{Revision: "r2", Images: map[string]string{"b": "b:2"}, NotBefore: metav1.NewTime(epoch.Add(10 * time.Second))}
	if err := writeRecords(pod, state, grace); err != nil {
		t.Fatal(err)
	}
	gotState, gotGrace, err := readRecords(pod)
	if err != nil || !apiequality.Semantic.DeepEqual(gotState, state) || !gotGrace.NotBefore.Equal(&grace.NotBefore) {
		t.Fatalf("round trip = %+v, %+v, %v", gotState, gotGrace, err)
	}
	if err := writeRecords(pod, state, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := pod.Annotations[v1alpha1.InPlaceUpdateGraceAnnotation]; ok {
		t.Fatal("writing a nil grace must remove the annotation")
	}
}

func TestReadRecordsCorruptGrace(t *testing.T) {
	state := `{"revision":"r2"}`
	tests := map[string]map[string]string{
		"grace_not_json":        {v1alpha1.InPlaceUpdateStateAnnotation: state, v1alpha1.InPlaceUpdateGraceAnnotation: `[`},
		"grace_without_images":  {v1alpha1.InPlaceUpdateStateAnnotation: state, v1alpha1.InPlaceUpdateGraceAnnotation: `{"revision":"r2","notBefore":"2026-03-01T12:00:00Z"}`},
		"grace_without_time":    {v1alpha1.InPlaceUpdateStateAnnotation: state, v1alpha1.InPlaceUpdateGraceAnnotation: `{"revision":"r2","images":{"a":"a:2"}}`},
		"grace_without_state":   {v1alpha1.InPlaceUpdateGraceAnnotation: `{"revision":"r2","images":{"a":"a:2"},"notBefore":"2026-03-01T12:00:00Z"}`},
		"grace_for_other_state": {v1alpha1.InPlaceUpdateStateAnnotation: state, v1alpha1.InPlaceUpdateGraceAnnotation: `{"revision":"r3","images":{"a":"a:2"},"notBefore":"2026-03-01T12:00:00Z"}`},
	}
	for name, annotations := range tests {
		t.Run(name, func(t *testing.T) {
			if _, _, err := readRecords(podWithAnnotations(annotations)); !errors.Is(err, ErrCorruptState) {
				t.Fatalf("readRecords err = %v, want ErrCorruptState", err)
			}
		})
	}
}

func TestMakeBatches(t *testing.T) {
	tests := []struct {
		name       string
		names      []string
		configured [][]string
		want       [][]string
	}{
		{name: "nothing_to_patch", names: nil, configured: [][]string{{"a"}}, want: nil},
		{name: "no_batches_one_batch", names: []string{"b", "a"}, want: [][]string{{"a", "b"}}},
		{name: "ordered", names: []string{"app", "sidecar"}, configured: [][]string{{"sidecar"}, {"app"}}, want: [][]string{{"sidecar"}, {"app"}}},
		{name: "unnamed_join_the_last_batch", names: []string{"app", "logger", "sidecar"}, configured: [][]string{{"sidecar"}, {"app"}}, want: [][]string{{"sidecar"}, {"app", "logger"}}},
		{name: "unchanged_batches_are_dropped", names: []string{"app"}, configured: [][]string{{"sidecar"}, {"app"}}, want: [][]string{{"app"}}},
		{name: "unnamed_go_last_even_if_last_batch_unchanged", names: []string{"logger", "sidecar"}, configured: [][]string{{"sidecar"}, {"app"}}, want: [][]string{{"sidecar"}, {"logger"}}},
		{name: "duplicate_names_first_batch_wins", names: []string{"a"}, configured: [][]string{{"a"}, {"a"}}, want: [][]string{{"a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := makeBatches(tc.names, tc.configured); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("makeBatches = %v, want %v", got, tc.want)
			}
		})
	}
}

func ptrTo(s string) *string { return &s }
