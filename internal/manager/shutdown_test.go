package manager

import (
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// The kubelet kills a Pod terminationGracePeriodSeconds after SIGTERM. The
// manager must have stopped its reconciles and released its Lease by then,
// or the next leader waits for the Lease to expire; a few seconds are left
// for the release itself.
func TestGracefulShutdownFitsTheTerminationGracePeriod(t *testing.T) {
	raw, err := os.ReadFile("../../config/manager/manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatalf("config/manager/manager.yaml: %v", err)
	}
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Fatal("config/manager/manager.yaml sets no terminationGracePeriodSeconds")
	}
	const releaseMargin = 3 * time.Second
	if limit := time.Duration(*grace) * time.Second; GracefulShutdownTimeout+releaseMargin > limit {
		t.Errorf("GracefulShutdownTimeout %s plus %s for the Lease exceeds terminationGracePeriodSeconds %s", GracefulShutdownTimeout, releaseMargin, limit)
	}
}
