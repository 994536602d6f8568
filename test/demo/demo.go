package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
	"github.com/stepwise-dev/stepwise/test/traffic"
)

// The releases of the story. The traffic simulator fails 20% of the
// requests of a Pod whose image tag ends in "-bad".
const (
	imageV2 = "example.com/web:v2"
	imageV3 = "example.com/web:v3-bad"
)

// options configure run.
type options struct {
	// ExamplesDir holds the manifests; empty means examples/demo of the
	// repository.
	ExamplesDir string
	// Namespace receives the demo's objects; empty means "demo".
	Namespace string
	// NoPrometheus runs as if Prometheus were missing: workload gate only.
	NoPrometheus bool
	// InstallPrometheus tries apt-get when Prometheus is missing (as root).
	InstallPrometheus bool
	// Terminal redraws the live view in place; otherwise each change of the
	// rollout is one line and the view is printed once per release.
	Terminal bool
	// Color paints the view.
	Color bool
	// Log receives the controllers' and client-go's logs; nil discards them.
	Log io.Writer
	// ReleaseTimeout bounds each release, including its rollback; 0 means 2m.
	ReleaseTimeout time.Duration
}

func (o options) withDefaults() (options, error) {
	if o.ExamplesDir == "" {
		root, err := envtestenv.RepoRoot()
		if err != nil {
			return o, err
		}
		o.ExamplesDir = filepath.Join(root, "examples", "demo")
	}
	if o.Namespace == "" {
		o.Namespace = "demo"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.ReleaseTimeout <= 0 {
		o.ReleaseTimeout = 2 * time.Minute
	}
	return o, nil
}

// demo is the running test bed and what the story needs to remember.
type demo struct {
	opts   options
	p      *progress
	client client.Client
	dyn    dynamic.Interface
	// analysis is false without Prometheus: the workload gate alone decides.
	analysis bool
	// cloneSet and rollout are the manifests as created.
	cloneSet *stepwisev1.CloneSet
	rollout  *stepwisev1.Rollout
}

// run tells the whole story and returns nil when every expectation held.
// Everything it starts is stopped before it returns.
func run(ctx context.Context, out io.Writer, opts options) (err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return err
	}
	p := newProgress(out, opts.Color)
	d := &demo{opts: opts, p: p}

	// The controllers log through controller-runtime's process-wide logger
	// (which keeps the first one set): to opts.Log, so that the story stays
	// readable and controller-runtime does not complain it has none.
	// client-go's klog is left alone: it prints only errors by default, and
	// swapping it while informers of an earlier run wind down is a data race.
	ctrl.SetLogger(zap.New(zap.WriteTo(opts.Log), zap.UseDevMode(true)))

	// Read the manifests before starting anything: a typo should cost
	// milliseconds, not a cluster start.
	files, err := readManifests(opts.ExamplesDir)
	if err != nil {
		return err
	}

	p.step("Checking for Prometheus")
	promBinary, promErr := findPrometheus(ctx, p, opts)
	if promErr != nil {
		p.warn("No Prometheus: %v", promErr)
		p.warn("Going on with the workload gate only: the Rollout gets no analysis, so nothing tells v3's errors apart; the demo plays the on-call engineer and requests the abort itself.")
	} else {
		d.analysis = true
		p.detail("using %s", promBinary)
	}

	p.step("Starting a kwok cluster (1 node)")
	cluster, err := kwokcluster.Start(ctx, kwokcluster.Options{Nodes: 1, Logf: p.detail})
	if err != nil {
		return fmt.Errorf("starting the kwok cluster: %w", err)
	}
	defer func() {
		p.step("Cleaning up")
		if stopErr := cluster.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the kwok cluster: %w", stopErr))
		}
	}()
	if d.client, err = harness.NewClient(cluster.RESTConfig); err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	if d.dyn, err = dynamic.NewForConfig(cluster.RESTConfig); err != nil {
		return fmt.Errorf("creating a dynamic client: %w", err)
	}
	if err := cluster.CreateNamespace(ctx, opts.Namespace); err != nil {
		return err
	}
	// The controllers run as they would in a cluster: as the manager's
	// ServiceAccount, with the RBAC of config/rbac.
	managerCfg, err := shippedrbac.ManagerConfig(ctx, cluster.RESTConfig)
	if err != nil {
		return fmt.Errorf("installing the manager's RBAC: %w", err)
	}

	p.step("Starting the traffic simulator, Prometheus and the controllers")
	sim, err := traffic.Start(ctx, "127.0.0.1:0", traffic.Options{
		Client:    d.client,
		Namespace: opts.Namespace,
		Logf:      p.detail,
	})
	if err != nil {
		return fmt.Errorf("starting the traffic simulator: %w", err)
	}
	defer sim.Stop()
	p.detail("traffic simulator: %d requests/s per ready Pod, %.0f%% errors for tags ending in %q, metrics at http://%s/metrics",
		traffic.DefaultRequestsPerSecond, traffic.BadErrorRate*100, traffic.BadTagSuffix, sim.Addr())

	// Prometheus waits up to ~6 s for its first scrape (2.42 reloads static
	// targets every 5 s): start the manager meanwhile.
	var (
		prom    *promrunner.Prometheus
		promRun error
		started sync.WaitGroup
	)
	if d.analysis {
		started.Go(func() {
			prom, promRun = promrunner.Start(ctx, []string{sim.Addr()}, promrunner.Options{Binary: promBinary, Logf: p.detail})
		})
	}
	mgr, mgrErr := harness.StartManager(ctx, managerCfg, manager.Options{})
	started.Wait()
	if prom != nil {
		defer prom.Stop()
	}
	if mgrErr != nil {
		return fmt.Errorf("starting the controllers: %w", mgrErr)
	}
	defer mgr.Stop()
	if promRun != nil {
		// Prometheus is installed but does not work: that is not the
		// "missing" case the fallback is for.
		return fmt.Errorf("starting prometheus: %w", promRun)
	}
	promURL := ""
	if prom != nil {
		promURL = prom.URL()
		p.detail("prometheus at %s scrapes the simulator every second", promURL)
	}
	p.detail("controllers running in-process (CloneSet, Rollout)")

	if d.cloneSet, d.rollout, err = decodeManifests(files, opts.Namespace, promURL); err != nil {
		return err
	}
	return d.story(ctx)
}

// story applies the manifests, releases v2 and v3 and judges the outcome.
func (d *demo) story(ctx context.Context) error {
	p := d.p
	cs, ro := d.cloneSet, d.rollout
	p.step("Applying %s: CloneSet %s (%d Pods of %s) and Rollout %s (%d steps)",
		d.opts.ExamplesDir, cs.Name, replicas(cs), cs.Spec.Template.Spec.Containers[0].Image, ro.Name, len(ro.Spec.Steps))
	if err := d.client.Create(ctx, cs.DeepCopy()); err != nil {
		return fmt.Errorf("creating CloneSet %s: %w", cs.Name, err)
	}
	if _, err := d.waitPods(ctx, cs.Spec.Template.Spec.Containers[0].Image, time.Minute); err != nil {
		return err
	}
	if err := d.client.Create(ctx, ro.DeepCopy()); err != nil {
		return fmt.Errorf("creating Rollout %s: %w", ro.Name, err)
	}
	initial, err := d.follow(ctx, "v1", false, d.opts.ReleaseTimeout, nil)
	if err != nil {
		return err
	}
	p.detail("Rollout %s is %s: stable revision %s; it governs CloneSet %s, so a new revision waits for it", ro.Name, initial.last.Status.Phase, initial.last.Status.StableRevision, d.cloneSet.Name)

	before, err := d.pods(ctx)
	if err != nil {
		return err
	}

	p.step("Releasing v2 (%s): a good release", imageV2)
	v2, err := d.release(ctx, "v2", imageV2, false)
	if err != nil {
		return err
	}
	afterV2, err := d.settle(ctx, v2, cli.Done, imageV2)
	if err != nil {
		return err
	}

	p.step("Releasing v3 (%s): a bad release", imageV3)
	v3, err := d.release(ctx, "v3", imageV3, !d.analysis)
	if err != nil {
		return err
	}
	afterV3, err := d.settle(ctx, v3, cli.Failed, imageV2)
	if err != nil {
		return err
	}

	s := summary{
		analysis: d.analysis,
		steps:    len(ro.Spec.Steps),
		before:   before, afterV2: afterV2, afterV3: afterV3,
		v2: v2, v3: v3,
	}
	p.step("Summary")
	if failures := s.write(p.out, p.color); len(failures) > 0 {
		return fmt.Errorf("%d expectation(s) failed, marked ✗ in the verdict above", len(failures))
	}
	return nil
}

// release sets the CloneSet's image and follows the Rollout until it is
// Healthy or Aborted. requestAbort asks for an abort, as `kubectl stepwise
// abort` does, once the first step's canary Pods are ready: without
// Prometheus nothing else would stop a bad release.
func (d *demo) release(ctx context.Context, label, image string, requestAbort bool) (*followed, error) {
	// A merge patch of what changed, as `kubectl set image` would send: it
	// never mentions the partition, which the Rollout decides. The
	// containers list goes whole, so it is sent on the condition that
	// nothing changed since it was read (the controllers write status all
	// the time), and read again when something did.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs := &stepwisev1.CloneSet{}
		if err := d.client.Get(ctx, client.ObjectKeyFromObject(d.cloneSet), cs); err != nil {
			return fmt.Errorf("reading CloneSet %s: %w", d.cloneSet.Name, err)
		}
		before := cs.DeepCopy()
		cs.Spec.Template.Spec.Containers[0].Image = image
		return d.client.Patch(ctx, cs, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return nil, fmt.Errorf("setting the image of CloneSet %s to %s: %w", d.cloneSet.Name, image, err)
	}
	var onChange func(cli.Snapshot) error
	if requestAbort {
		requested := false
		onChange = func(s cli.Snapshot) error {
			st := s.Rollout.Status
			if requested || st.CurrentStepIndex == nil || *st.CurrentStepIndex != 0 || st.Reason != stepwisev1.ReasonStepPaused {
				return nil
			}
			requested = true
			d.p.detail("%s: no analysis without Prometheus: the demo requests an abort, as `kubectl stepwise abort %s` would", label, s.Rollout.Name)
			for _, a := range cli.Actions() {
				if a.Name == "abort" {
					_, err := cli.Request(ctx, d.dyn, s.Rollout.Namespace, s.Rollout.Name, a, cli.RequestToken(time.Now()))
					return err
				}
			}
			return errors.New("internal/cli offers no abort action")
		}
	}
	f, err := d.follow(ctx, label, true, d.opts.ReleaseTimeout, onChange)
	if err != nil {
		return nil, err
	}
	f.image = image
	return f, nil
}

// settle waits for every Pod to be ready on image when the release ended
// as expected (want), and returns the Pods. Otherwise they may never get
// there: it returns them as they are, for the summary to show what went
// wrong, rather than wait for a timeout.
func (d *demo) settle(ctx context.Context, f *followed, want cli.Outcome, image string) (map[string]podState, error) {
	if f.verdict.Outcome != want {
		d.p.warn("%s did not end as expected: %s", f.label, f.verdict.Summary)
		return d.pods(ctx)
	}
	d.p.detail("waiting for every Pod to be ready on %s", image)
	return d.waitPods(ctx, image, d.opts.ReleaseTimeout)
}

// podState is what the summary shows of one Pod.
type podState struct {
	UID      string
	Image    string
	Restarts int32
	Ready    bool
}

// pods reads the live Pods of the CloneSet by name.
func (d *demo) pods(ctx context.Context) (map[string]podState, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.cloneSet.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of CloneSet %s: %w", d.cloneSet.Name, err)
	}
	var list corev1.PodList
	if err := d.client.List(ctx, &list, client.InNamespace(d.opts.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing Pods: %w", err)
	}
	out := make(map[string]podState, len(list.Items))
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		st := podState{UID: string(pod.UID), Image: pod.Spec.Containers[0].Image, Ready: podReady(pod)}
		for _, c := range pod.Status.ContainerStatuses {
			st.Restarts += c.RestartCount
			// The kubelet (kwok) reports the image it runs: a Pod is on an
			// image only once both agree.
			if c.Name == pod.Spec.Containers[0].Name && c.Image != st.Image {
				st.Ready = false
			}
		}
		out[pod.Name] = st
	}
	return out, nil
}

// waitPods waits until the CloneSet has all its Pods ready on image and
// returns them.
func (d *demo) waitPods(ctx context.Context, image string, timeout time.Duration) (map[string]podState, error) {
	want := int(replicas(d.cloneSet))
	var last map[string]podState
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := d.pods(ctx)
		if err != nil {
			return false, err
		}
		last = pods
		if len(pods) != want {
			return false, nil
		}
		for _, pod := range pods {
			if !pod.Ready || pod.Image != image {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d ready Pods on %s (last seen: %v): %w", want, image, last, err)
	}
	d.p.detail("%d Pods ready on %s", want, image)
	return last, nil
}

func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func replicas(cs *stepwisev1.CloneSet) int32 {
	if cs.Spec.Replicas == nil {
		return 1
	}
	return *cs.Spec.Replicas
}
