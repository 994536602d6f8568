package cloneset

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestStatusPatch(t *testing.T) {
	tests := []struct {
		name        string
		status      stepwisev1.CloneSetStatus
		wantRollout any
	}{
		{name: "ungoverned removes the rollout field", status: stepwisev1.CloneSetStatus{Replicas: 0}, wantRollout: nil},
		{name: "governed names its Rollout", status: stepwisev1.CloneSetStatus{Rollout: &stepwisev1.CloneSetGovernor{Name: "web", Revision: "web-1", Partition: intstr.FromInt32(2)}},
			wantRollout: map[string]any{"name": "web", "revision": "web-1", "partition": float64(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := statusPatch("42", &tt.status)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Metadata map[string]any `json:"metadata"`
				Status   map[string]any `json:"status"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if rv := got.Metadata["resourceVersion"]; rv != "42" {
				t.Errorf("metadata.resourceVersion = %v, want the version read (42): a stale round must fail, not write", rv)
			}
			rollout, present := got.Status["rollout"]
			if !present {
				t.Errorf("status.rollout missing from %s: a merge patch keeps what it does not name", body)
			}
			if gotJSON, wantJSON := mustJSON(t, rollout), mustJSON(t, tt.wantRollout); gotJSON != wantJSON {
				t.Errorf("status.rollout = %s, want %s", gotJSON, wantJSON)
			}
			if _, present := got.Status["replicas"]; !present {
				t.Errorf("status.replicas missing from %s: zero counts are written too", body)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
