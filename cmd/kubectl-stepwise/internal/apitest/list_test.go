package apitest

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
)

// namedRollout creates a two-step Rollout name over CloneSet web, with
// traffic routing when routed, and writes status as the controller would.
func namedRollout(t *testing.T, ns, name string, routed bool, status func(*stepwisev1.RolloutStatus)) *stepwisev1.Rollout {
	t.Helper()
	r := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web"},
			Steps:       []stepwisev1.RolloutStep{{Partition: intstr.FromString("80%")}, {Partition: intstr.FromInt32(0)}},
		},
	}
	if routed {
		r.Spec.TrafficRouting = &stepwisev1.TrafficRouting{StableService: "web", CanaryService: stepwisev1.CanaryService{Name: "web-canary"},
			HTTPRoutes: []stepwisev1.HTTPRouteReference{{Name: "web"}}}
	}
	if err := env.client.Create(t.Context(), r); err != nil {
		t.Fatalf("creating rollout %s: %v", name, err)
	}
	r.Status.ObservedGeneration = r.Generation
	status(&r.Status)
	if err := env.client.Status().Update(t.Context(), r); err != nil {
		t.Fatalf("writing the status of rollout %s: %v", name, err)
	}
	return r
}

func TestList(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	web := namedRollout(t, ns, "web", false, func(st *stepwisev1.RolloutStatus) {
		st.Phase, st.Reason, st.StableRevision = stepwisev1.RolloutHealthy, stepwisev1.ReasonStable, "web-1"
	})
	namedRollout(t, ns, "checkout", true, func(st *stepwisev1.RolloutStatus) {
		st.Phase, st.Reason, st.CurrentStepIndex = stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForTraffic, new(int32(0))
		st.Traffic = &stepwisev1.TrafficStatus{CanaryWeight: 20}
	})
	namedRollout(t, other, "api", false, func(st *stepwisev1.RolloutStatus) {
		st.Phase, st.Reason, st.CurrentStepIndex = stepwisev1.RolloutPaused, stepwisev1.ReasonAwaitingPromotion, new(int32(1))
	})
	// The ages are read against a clock five minutes after the first
	// creation, so that they do not depend on when the test runs.
	clock := commands.Options{Now: func() time.Time { return web.CreationTimestamp.Add(5 * time.Minute) }}

	res := run(t, ns, clock, "list")
	want := "NAME      PHASE        STEP  WEIGHT  AGE  REASON\n" +
		"checkout  Progressing  1/2   20%     5m   WaitingForTraffic\n" +
		"web       Healthy      -     -       5m   Stable\n"
	if res.code != commands.ExitOK || res.stdout != want {
		t.Errorf("list (exit %d):\n%s\nwant:\n%s\nstderr:\n%s", res.code, res.stdout, want, res.stderr)
	}

	// Every namespace: earlier tests' namespaces show too, so only the
	// lines of this test's are compared.
	res = run(t, ns, clock, "list", "-A")
	if res.code != commands.ExitOK || !strings.HasPrefix(res.stdout, "NAMESPACE") {
		t.Fatalf("list -A (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}
	var mine []string
	for line := range strings.Lines(res.stdout) {
		if f := strings.Fields(line); f[0] == ns || f[0] == other {
			mine = append(mine, strings.Join(f, " "))
		}
	}
	wantA := []string{ns + " checkout Progressing 1/2 20% 5m WaitingForTraffic", ns + " web Healthy - - 5m Stable", other + " api Paused 2/2 - 5m AwaitingPromotion"}
	if strings.Join(mine, "\n") != strings.Join(wantA, "\n") {
		t.Errorf("list -A, this test's lines:\n%s\nwant:\n%s", strings.Join(mine, "\n"), strings.Join(wantA, "\n"))
	}

	if res := run(t, newNamespace(t), clock, "list"); res.code != commands.ExitOK || !strings.HasPrefix(res.stdout, "No rollouts found in namespace cli-") {
		t.Errorf("list of an empty namespace (exit %d): %q", res.code, res.stdout)
	}
}

// TestRolloutNamesComplete: the shells ask the plugin for completions
// with __complete, and a rollout NAME completes from the namespace's
// Rollouts.
func TestRolloutNamesComplete(t *testing.T) {
	ns := newNamespace(t)
	for _, name := range []string{"web", "worker", "api"} {
		namedRollout(t, ns, name, false, func(*stepwisev1.RolloutStatus) {})
	}
	for _, args := range [][]string{{"promote", "w"}, {"undo", "w"}, {"status", "w"}, {"get", "rollout", "w"}} {
		line := append([]string{"__complete", "--kubeconfig", env.kubeconfig, "-n", ns}, args...)
		res := runExact(t, commands.Options{}, line...)
		if got := strings.Join(strings.Fields(res.stdout), " "); res.code != commands.ExitOK || !strings.HasPrefix(got, "web worker :4") {
			t.Errorf("%s: exit %d, completions %q", strings.Join(args, " "), res.code, got)
		}
	}
	res := runExact(t, commands.Options{}, "__complete", "--kubeconfig", env.kubeconfig, "-n", ns, "get", "rollout/")
	if got := strings.Join(strings.Fields(res.stdout), " "); !strings.HasPrefix(got, "rollout/api rollout/web rollout/worker :4") {
		t.Errorf("get rollout/: completions %q", got)
	}
}

func rolloutOf(t *testing.T, ns, name string) *stepwisev1.Rollout {
	t.Helper()
	r := &stepwisev1.Rollout{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
		t.Fatal(err)
	}
	return r
}
