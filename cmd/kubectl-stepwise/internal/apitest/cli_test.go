package apitest

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// fixedNow is the clock of the commands whose output the tests compare.
var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 123000000, time.UTC)

func fixedClock() commands.Options {
	return commands.Options{Now: func() time.Time { return fixedNow }}
}

func TestActionsWriteAnnotations(t *testing.T) {
	ns := newNamespace(t)
	createRollout(t, ns)
	for _, a := range cli.Actions() {
		t.Run(a.Name, func(t *testing.T) {
			res := run(t, ns, fixedClock(), a.Name, "web")
			if res.code != commands.ExitOK {
				t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
			}
			token := "2026-11-29T12:00:00.123Z"
			want := "rollout " + ns + "/web: " + a.Name + " requested (" + a.Annotation + "=" + token + ")"
			if !strings.HasPrefix(res.stdout, want) {
				t.Errorf("stdout:\n%s\nwant it to start with:\n%s", res.stdout, want)
			}
			r := &stepwisev1.Rollout{}
			if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, r); err != nil {
				t.Fatal(err)
			}
			got := r.Annotations[a.Annotation]
			if got != token {
				t.Errorf("annotation %s = %q, want %q", a.Annotation, got, token)
			}
			if _, err := time.Parse(time.RFC3339, got); err != nil {
				t.Errorf("annotation value is not RFC 3339: %v", err)
			}
			if !managedBy(r, cli.FieldManager) {
				t.Errorf("no managedFields entry of %s: %+v", cli.FieldManager, r.ManagedFields)
			}
		})
	}

	// The patch adds its key and leaves the others, the earlier requests
	// included, as they were.
	r := &stepwisev1.Rollout{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, r); err != nil {
		t.Fatal(err)
	}
	if len(r.Annotations) != len(cli.Actions()) {
		t.Errorf("annotations after every action: %v", r.Annotations)
	}
}

func TestActionOutputAndMissingRollout(t *testing.T) {
	ns := newNamespace(t)
	createRollout(t, ns)
	res := run(t, ns, fixedClock(), "pause", "web", "-o", "yaml")
	if res.code != commands.ExitOK || !strings.Contains(res.stdout, "stepwise.dev/pause-at: \"2026-11-29T12:00:00.123Z\"") ||
		strings.Contains(res.stdout, "managedFields") {
		t.Errorf("pause -o yaml (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
	}

	res = run(t, ns, fixedClock(), "promote", "nope")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, `rollouts.stepwise.dev "nope" not found`) {
		t.Errorf("promote of a missing rollout: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

func managedBy(o metav1.Object, manager string) bool {
	for _, f := range o.GetManagedFields() {
		if f.Manager == manager {
			return true
		}
	}
	return false
}

// healthyStatus is what the controller writes at the end of a rollout of
// revision web-1, the CloneSet's update revision.
func healthyStatus(r *stepwisev1.Rollout) {
	r.Status.ObservedGeneration = r.Generation
	r.Status.Phase = stepwisev1.RolloutHealthy
	r.Status.Reason = stepwisev1.ReasonStable
	r.Status.StableRevision = "web-1"
	r.Status.CanaryRevision = "web-1"
	r.Status.CurrentStepIndex = nil
}

func TestStatusHealthy(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app")
	createRollout(t, ns)
	status := start(t.Context(), ns, commands.Options{}, "status", "web", "--timeout", "1m")
	status.waitForOutput(t, "waiting for the controller to observe generation 1 (status is for 0)")

	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.ObservedGeneration = r.Generation
		r.Status.Phase = stepwisev1.RolloutProgressing
		r.Status.Reason = stepwisev1.ReasonWaitingForPods
		r.Status.CurrentStepIndex = new(int32(1))
		r.Status.StableRevision = "web-0"
		r.Status.CanaryRevision = "web-1"
	})
	status.waitForOutput(t, "Progressing, step 2/3 (partition 50%), WaitingForPods")

	setRolloutStatus(t, ns, healthyStatus)
	res := status.wait(t, time.Minute)
	if res.code != commands.ExitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	want := "rollout " + ns + "/web: waiting for the controller to observe generation 1 (status is for 0)\n" +
		"rollout " + ns + "/web: Progressing, step 2/3 (partition 50%), WaitingForPods\n" +
		"rollout " + ns + "/web: Healthy, stable revision web-1\n"
	if res.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", res.stdout, want)
	}
}

// TestStatusFollowsTheWorkload checks that a Healthy phase for an older
// revision does not end the wait, and that a change of the workload alone
// (here, its template reverted to the stable revision) does, which only a
// watch of the workload can see.
func TestStatusFollowsTheWorkload(t *testing.T) {
	ns := newNamespace(t)
	cs := createCloneSet(t, ns, "app")
	createRollout(t, ns)
	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		healthyStatus(r)
		r.Status.StableRevision, r.Status.CanaryRevision = "web-0", "web-0"
	})
	status := start(t.Context(), ns, commands.Options{}, "status", "web", "--timeout", "1m")
	status.waitForOutput(t, "waiting for the controller to pick up revision web-1 (stable is web-0)")

	cs.Status.UpdateRevision = "web-0"
	if err := env.client.Status().Update(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	if res := status.wait(t, time.Minute); res.code != commands.ExitOK || !strings.HasSuffix(res.stdout, "Healthy, stable revision web-0\n") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
}

func TestStatusAborted(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app")
	createRollout(t, ns)
	status := start(t.Context(), ns, commands.Options{}, "status", "web", "--timeout", "1m")
	status.waitForOutput(t, "waiting for the controller to observe generation 1")

	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.ObservedGeneration = r.Generation
		r.Status.Phase = stepwisev1.RolloutAborted
		r.Status.Reason = stepwisev1.ReasonAnalysisFailed
		r.Status.Message = "error-rate: 0.2 is above 0.01 at step 1"
		r.Status.StableRevision = "web-0"
		r.Status.CanaryRevision = "web-1"
	})
	res := status.wait(t, time.Minute)
	if res.code != commands.ExitError {
		t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", res.code, commands.ExitError, res.stdout, res.stderr)
	}
	want := "error: rollout " + ns + "/web: Aborted (AnalysisFailed): error-rate: 0.2 is above 0.01 at step 1\n"
	if res.stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", res.stderr, want)
	}
}

func TestStatusTimeout(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app")
	createRollout(t, ns)
	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.ObservedGeneration = r.Generation
		r.Status.Phase = stepwisev1.RolloutPaused
		r.Status.Reason = stepwisev1.ReasonAwaitingPromotion
		r.Status.CurrentStepIndex = new(int32(0))
	})
	began := time.Now()
	res := run(t, ns, commands.Options{}, "status", "web", "--timeout", "2s")
	if res.code != commands.ExitTimeout {
		t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", res.code, commands.ExitTimeout, res.stdout, res.stderr)
	}
	if took := time.Since(began); took < 2*time.Second {
		t.Errorf("gave up after %s, before the timeout", took)
	}
	want := "error: timed out after 2s waiting for rollout " + ns + "/web: Paused, step 1/3 (partition 90%), AwaitingPromotion\n"
	if res.stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", res.stderr, want)
	}
}

func TestStatusMissingRollout(t *testing.T) {
	ns := newNamespace(t)
	res := run(t, ns, commands.Options{}, "status", "web", "--timeout", "10s")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, `rollouts.stepwise.dev "web" not found`) {
		t.Errorf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
}

// TestPlanIsAcceptedByTheAPIServer sends what plan prints to the API server
// as a server-side dry-run create: schema, CEL rules and all.
func TestPlanIsAcceptedByTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app", "sidecar")
	cases := map[string][]string{
		"full": {"--steps", "10%,50%,100%", "--pause", "1m", "--error-rate-max", "0.01",
			"--prometheus", "http://prometheus.monitoring:9090", "--container", "app", "--version-constraint", ">=1.0.0 <2.0.0"},
		"manual pauses":  {"--steps", "1%,2%,25%,99%,100%", "--pause", "manual", "--name", "web-manual"},
		"one step, json": {"--steps", "100%", "-o", "json"},
		"twenty steps": {"--steps", "5%,10%,15%,20%,25%,30%,35%,40%,45%,50%,55%,60%,65%,70%,75%,80%,85%,90%,95%,100%",
			"--error-rate-max", "0", "--prometheus", "https://prom.example.com/api/prom"},
		"templates": {"--steps", "10%,100%", "--analysis-template", "error-rate", "--analysis-template", "cluster:smoke",
			"--background-template", "cluster:latency-p99", "--analysis-arg", "service=checkout", "--analysis-arg", "window=2m"},
	}
	for name, flags := range cases {
		t.Run(name, func(t *testing.T) {
			res := run(t, ns, commands.Options{}, append([]string{"plan", "web"}, flags...)...)
			if res.code != commands.ExitOK {
				t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
			}
			u := decode(t, res.stdout)
			if u.GetNamespace() != ns || u.GetKind() != "Rollout" {
				t.Fatalf("plan printed %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
			}
			if _, err := env.dynamic.Resource(cli.RolloutResource()).Namespace(ns).Create(t.Context(), u,
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Fatalf("the API server refuses the plan: %v\n%s", err, res.stdout)
			}
		})
	}

	// The dry run does validate: a plan edited into breaking a CEL rule
	// (the last partition must be 0) is refused.
	res := run(t, ns, commands.Options{}, "plan", "web", "--steps", "10%,100%")
	broken := strings.Replace(res.stdout, "partition: 0", "partition: 10%", 1)
	_, err := env.dynamic.Resource(cli.RolloutResource()).Namespace(ns).Create(t.Context(), decode(t, broken),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "the last step must have partition 0") {
		t.Errorf("a broken plan was not refused as expected: %v", err)
	}
}

func TestPlanErrorsNeedingTheCloneSet(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app", "sidecar")
	res := run(t, ns, commands.Options{}, "plan", "web", "--steps", "100%", "--version-constraint", ">=1.0.0")
	if res.code != commands.ExitError || !strings.HasPrefix(res.stderr, "error: --container: CloneSet "+ns+"/web runs app, sidecar") {
		t.Errorf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	res = run(t, ns, commands.Options{}, "plan", "nope", "--steps", "100%")
	if res.code != commands.ExitError || !strings.Contains(res.stderr, `clonesets.stepwise.dev "nope" not found`) {
		t.Errorf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
}

func decode(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("plan printed no YAML or JSON: %v\n%s", err, manifest)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatalf("plan printed no object: %v\n%s", err, manifest)
	}
	return u
}

func TestGet(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app")
	createRollout(t, ns)
	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.ObservedGeneration = r.Generation
		r.Status.Phase = stepwisev1.RolloutProgressing
		r.Status.Reason = stepwisev1.ReasonWaitingForPods
		r.Status.CurrentStepIndex = new(int32(1))
		r.Status.StableRevision = "web-0"
		r.Status.CanaryRevision = "web-1"
		r.Status.Measurements = []stepwisev1.Measurement{{
			Metric: "error-rate", Step: 0, Value: "0.004", Phase: stepwisev1.MeasurementSuccessful,
			Time: metav1.NewTime(fixedNow.Add(-2 * time.Minute)),
		}}
	})
	res := run(t, ns, fixedClock(), "get", "rollout", "web")
	if res.code != commands.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	want := "Rollout:   " + ns + `/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 50%
Phase:     Progressing (WaitingForPods)
Canary:    web-1
Stable:    web-0
Gate:      waiting: 3/5 updated pods ready
Pause:     none

Steps:
     #  PARTITION  PAUSE
  ✓  1  90%        1m
  ▶  2  50%
        [############........] 3/5 updated pods ready
     3  0

Measurements (1):
  TIME    STEP  METRIC      VALUE  PHASE
  2m ago  1     error-rate  0.004  Successful
`
	if res.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", res.stdout, want)
	}

	for format, want := range map[string]string{"yaml": "kind: Rollout\n", "json": `"kind": "Rollout"`} {
		res := run(t, ns, fixedClock(), "get", "rollout/web", "-o", format)
		if res.code != commands.ExitOK || !strings.Contains(res.stdout, want) || !strings.Contains(res.stdout, "WaitingForPods") ||
			strings.Contains(res.stdout, "managedFields") {
			t.Errorf("get -o %s (exit %d):\n%s%s", format, res.code, res.stdout, res.stderr)
		}
	}
}

// TestGetWatch checks that --watch draws again when the workload changes
// (the progress bar moves) and when the Rollout does, and ends on Ctrl-C.
func TestGetWatch(t *testing.T) {
	ns := newNamespace(t)
	cs := createCloneSet(t, ns, "app")
	createRollout(t, ns)
	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.ObservedGeneration = r.Generation
		r.Status.Phase = stepwisev1.RolloutProgressing
		r.Status.Reason = stepwisev1.ReasonWaitingForPods
		r.Status.CurrentStepIndex = new(int32(1))
	})
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	watch := start(ctx, ns, fixedClock(), "get", "rollout", "web", "--watch")
	watch.waitForOutput(t, "3/5 updated pods ready")

	cs.Status.UpdatedReplicas, cs.Status.UpdatedReadyReplicas = 5, 5
	if err := env.client.Status().Update(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	watch.waitForOutput(t, "[####################] 5/5 updated pods ready")

	setRolloutStatus(t, ns, func(r *stepwisev1.Rollout) {
		r.Status.Reason = stepwisev1.ReasonStepPaused
		r.Status.StepReadyAt = &metav1.Time{Time: fixedNow.Add(-10 * time.Second)}
	})
	watch.waitForOutput(t, "Gate:      passed 10s ago")

	interrupt()
	res := watch.wait(t, 30*time.Second)
	if res.code != commands.ExitInterrupted {
		t.Errorf("exit %d after the interrupt, want %d; stderr:\n%s", res.code, commands.ExitInterrupted, res.stderr)
	}
	// Out of a terminal, each change appends a whole view.
	if n := strings.Count(res.stdout, "Rollout:   "+ns+"/web"); n != 3 {
		t.Errorf("%d views drawn, want 3 (start, workload change, rollout change):\n%s", n, res.stdout)
	}
}
