package rollout

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestGrantOf(t *testing.T) {
	tests := []struct {
		name              string
		stable, canary    string
		decided, revision string
		partition         string
	}{
		{name: "idle: every Pod may run the stable revision", stable: "web-1", decided: "100%", revision: "web-1", partition: "0"},
		{name: "a step: the canary up to the step's partition", stable: "web-1", canary: "web-2", decided: "60%", revision: "web-2", partition: "60%"},
		{name: "aborted: the canary acknowledged, every Pod back", stable: "web-1", canary: "web-2", decided: "100%", revision: "web-2", partition: "100%"},
		{name: "a downgrade on the fast path: every Pod at once", stable: "web-3", canary: "web-2", decided: "0", revision: "web-2", partition: "0"},
		{name: "a rollback to stable: every Pod at once", stable: "web-1", decided: "0", revision: "web-1", partition: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := grantOf(&v1alpha1.RolloutStatus{StableRevision: tt.stable, CanaryRevision: tt.canary}, intstr.Parse(tt.decided))
			if g.Revision != tt.revision || g.Partition.String() != tt.partition {
				t.Errorf("grant {%s %s}, want {%s %s}", g.Revision, g.Partition.String(), tt.revision, tt.partition)
			}
		})
	}
}
