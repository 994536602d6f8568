package apitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/internal/testsupport/syncbuf"
)

// suite is what TestMain sets up once for every test of the package: one
// API server start is the slow part. Each test works in its own namespace.
type suite struct {
	kubeconfig string
	client     client.Client
	dynamic    dynamic.Interface
	// testEnv adds users with fewer rights than the tester's.
	testEnv *envtest.Environment
	dir     string
}

// env is written by TestMain only, before any test runs.
var env suite

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	testEnv, cfg, stop, err := envtestenv.StartSuite()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()

	// The commands get a kubeconfig file, as people run them, so that the
	// real --kubeconfig and -n handling is what the tests exercise.
	user, err := testEnv.AddUser(envtest.User{Name: "tester", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "adding envtest user:", err)
		return 1
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "writing kubeconfig:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kubectl-stepwise-apitest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	env.testEnv, env.dir = testEnv, dir
	env.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(env.kubeconfig, kubeconfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := stepwisev1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// result is a finished command line.
type result struct {
	code           int
	stdout, stderr string
}

// running is a command line running in a goroutine.
type running struct {
	stdout, stderr *syncbuf.Buffer
	done           chan result
}

// start runs kubectl-stepwise args against the test API server in
// namespace ns, in a goroutine.
func start(ctx context.Context, ns string, opts commands.Options, args ...string) *running {
	r := &running{stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan result, 1)}
	args = append(args, "--kubeconfig", env.kubeconfig, "-n", ns)
	go func() {
		code := commands.Execute(ctx, genericiooptions.IOStreams{In: strings.NewReader(""), Out: r.stdout, ErrOut: r.stderr}, args, opts)
		r.done <- result{code: code, stdout: r.stdout.String(), stderr: r.stderr.String()}
	}()
	return r
}

// runExact runs a command line as given, to its end: no kubeconfig or
// namespace is added, so that the line can end with a word to complete.
func runExact(t *testing.T, opts commands.Options, args ...string) result {
	t.Helper()
	r := &running{stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan result, 1)}
	go func() {
		code := commands.Execute(t.Context(), genericiooptions.IOStreams{In: strings.NewReader(""), Out: r.stdout, ErrOut: r.stderr}, args, opts)
		r.done <- result{code: code, stdout: r.stdout.String(), stderr: r.stderr.String()}
	}()
	return r.wait(t, time.Minute)
}

// userKubeconfig writes a kubeconfig for a user without any group, whose
// rights are the RBAC the test grants it.
func userKubeconfig(t *testing.T, name string) string {
	t.Helper()
	user, err := env.testEnv.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(env.dir, name+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs a command line to its end.
func run(t *testing.T, ns string, opts commands.Options, args ...string) result {
	t.Helper()
	return start(t.Context(), ns, opts, args...).wait(t, time.Minute)
}

func (r *running) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case res := <-r.done:
		return res
	case <-time.After(timeout):
		t.Fatalf("the command did not end within %s; stdout:\n%s\nstderr:\n%s", timeout, r.stdout, r.stderr)
		return result{}
	}
}

// waitForOutput waits until the command has printed want, which tells the
// test that the command is past its first read and watching.
func (r *running) waitForOutput(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(r.stdout.String(), want) {
		select {
		case res := <-r.done:
			t.Fatalf("the command ended (exit %d) before printing %q; stdout:\n%s\nstderr:\n%s", res.code, want, res.stdout, res.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not print %q; stdout:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
}

var namespaceCounter atomic.Int32

// newNamespace gives each test its own namespace, deleted at cleanup.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cli-%d-%d", namespaceCounter.Add(1), time.Now().UnixNano()%100000)}}
	if err := env.client.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), ns) })
	return ns.Name
}

// createCloneSet creates a CloneSet "web" and writes the status a CloneSet
// controller would: generation observed, update revision web-1.
func createCloneSet(t *testing.T, ns string, containers ...string) *stepwisev1.CloneSet {
	t.Helper()
	labels := map[string]string{"app": "web"}
	cs := &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: new(int32(10)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
			UpdateStrategy: stepwisev1.CloneSetUpdateStrategy{
				Type:      stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType,
				Partition: new(intstr.FromString("50%")),
			},
		},
	}
	for _, c := range containers {
		cs.Spec.Template.Spec.Containers = append(cs.Spec.Template.Spec.Containers, corev1.Container{Name: c, Image: "example.com/" + c + ":1.0.0"})
	}
	if err := env.client.Create(t.Context(), cs); err != nil {
		t.Fatalf("creating cloneset: %v", err)
	}
	cs.Status = stepwisev1.CloneSetStatus{
		ObservedGeneration: cs.Generation, Replicas: 10, ReadyReplicas: 10, AvailableReplicas: 10,
		UpdatedReplicas: 3, UpdatedReadyReplicas: 3, UpdateRevision: "web-1", CurrentRevision: "web-0",
	}
	if err := env.client.Status().Update(t.Context(), cs); err != nil {
		t.Fatalf("writing cloneset status: %v", err)
	}
	return cs
}

// createRollout creates the contract's Rollout "web" for CloneSet "web".
func createRollout(t *testing.T, ns string) *stepwisev1.Rollout {
	t.Helper()
	r := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web"},
			Steps: []stepwisev1.RolloutStep{
				{Partition: intstr.FromString("90%"), Pause: &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: time.Minute}}},
				{Partition: intstr.FromString("50%")},
				{Partition: intstr.FromInt32(0)},
			},
		},
	}
	if err := env.client.Create(t.Context(), r); err != nil {
		t.Fatalf("creating rollout: %v", err)
	}
	return r
}

// setRolloutStatus writes the Rollout's status as the controller would,
// reading the Rollout first so that the write is against its latest version.
func setRolloutStatus(t *testing.T, ns string, edit func(r *stepwisev1.Rollout)) {
	t.Helper()
	r := &stepwisev1.Rollout{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, r); err != nil {
		t.Fatalf("reading rollout: %v", err)
	}
	edit(r)
	if err := env.client.Status().Update(t.Context(), r); err != nil {
		t.Fatalf("writing rollout status: %v", err)
	}
}
