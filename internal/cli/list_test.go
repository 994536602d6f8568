package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestRenderList(t *testing.T) {
	healthy := newTestRollout()
	healthy.Name, healthy.CreationTimestamp = "api", metav1.NewTime(testNow.Add(-49*time.Hour))
	healthy.Status.Phase, healthy.Status.Reason = stepwisev1.RolloutHealthy, stepwisev1.ReasonStable

	stepping := newTestRollout()
	stepping.CreationTimestamp = metav1.NewTime(testNow.Add(-5 * time.Minute))
	stepping.Status.Phase, stepping.Status.Reason, stepping.Status.CurrentStepIndex = stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods, ptr.To[int32](1)

	routed := newTestRollout()
	routed.Namespace, routed.Name, routed.CreationTimestamp = "team-b", "checkout", metav1.NewTime(testNow.Add(-90*time.Second))
	routed.Spec.TrafficRouting = &stepwisev1.TrafficRouting{StableService: "checkout", CanaryService: stepwisev1.CanaryService{Name: "checkout-canary"}}
	routed.Status.Phase, routed.Status.Reason, routed.Status.CurrentStepIndex = stepwisev1.RolloutPaused, stepwisev1.ReasonAwaitingPromotion, ptr.To[int32](0)
	routed.Status.Traffic = &stepwisev1.TrafficStatus{CanaryWeight: 20, Matches: 1}

	stale := newTestRollout()
	stale.Name, stale.Generation = "stale", 3
	stale.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Hour))

	rollouts := []*stepwisev1.Rollout{healthy, stepping, stale, routed}
	got := RenderList(rollouts, ListOptions{Now: testNow})
	assertText(t, got, `NAME      PHASE            STEP  WEIGHT  AGE   REASON
api       Healthy          -     -       2d1h  Stable
web       Progressing      2/3   -       5m    WaitingForPods
stale     Unknown (stale)  -     -       60m
checkout  Paused           1/3   20%+1   90s   AwaitingPromotion
`)
	got = RenderList(rollouts[3:], ListOptions{Now: testNow, AllNamespaces: true})
	assertText(t, got, `NAMESPACE  NAME      PHASE   STEP  WEIGHT  AGE  REASON
team-b     checkout  Paused  1/3   20%+1   90s  AwaitingPromotion
`)

	var b strings.Builder
	if err := WriteList(&b, nil, "shop", ListOptions{}); err != nil || b.String() != "No rollouts found in namespace shop.\n" {
		t.Errorf("empty list: %q, %v", b.String(), err)
	}
}
