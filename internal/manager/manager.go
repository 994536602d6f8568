package manager

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/cloneset"
	"github.com/stepwise-dev/stepwise/controllers/index"
	"github.com/stepwise-dev/stepwise/controllers/podcache"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
	"github.com/stepwise-dev/stepwise/controllers/rollout/notification"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
	analysisprom "github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// Controller names, as --controllers and Options.Controllers take them and
// as controller-runtime's metrics label them.
const (
	CloneSetController = "cloneset"
	RolloutController  = "rollout"
)

// Controllers are all controllers, in start order.
var Controllers = []string{CloneSetController, RolloutController}

// Field owners of the controllers' writes, as managedFields name them. The
// Rollout's is the partition's owner, which GitOps tools see
// (workload.FieldManager).
const (
	CloneSetFieldOwner = "stepwise-cloneset"
	RolloutFieldOwner  = workload.FieldManager
)

// LeaderElectionID names the leader-election Lease.
const LeaderElectionID = "stepwise-manager.stepwise.dev"

// Defaults of the Options that have one.
const (
	// GracefulShutdownTimeout bounds how long a stopping manager waits for
	// running reconciles before it releases the Lease; it must stay below
	// the Pod's terminationGracePeriodSeconds (config/manager), or the
	// kubelet kills the manager before the Lease is released.
	GracefulShutdownTimeout    = 5 * time.Second
	DefaultCloneSetConcurrency = 4
	DefaultRolloutConcurrency  = rollout.DefaultConcurrency
)

// Options configure New. The zero value is the shipped setup with every
// controller, no metrics or health endpoints and no leader election.
type Options struct {
	// Metrics serves /metrics; see MetricsOptions.
	Metrics MetricsOptions
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" turns
	// them off.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles (heap, CPU,
	// goroutines), for finding where memory and time go; "" or "0" turns
	// them off. Bind it to loopback: profiles are served to anyone.
	PprofBindAddress string
	// LeaderElection elects one replica to reconcile, with a Lease named
	// LeaderElectionID in LeaderElectionNamespace (the Pod's namespace when
	// empty).
	LeaderElection          bool
	LeaderElectionNamespace string
	// CloneSetConcurrency and RolloutConcurrency are the reconciles run in
	// parallel; 0 takes the defaults.
	CloneSetConcurrency int
	RolloutConcurrency  int
	// Controllers names the controllers to run (CloneSetController,
	// RolloutController); empty runs all.
	Controllers []string
	// AnalysisAddresses restricts where analysis may connect (URL prefixes
	// or hosts, see rollout.Reconciler); empty allows any address.
	AnalysisAddresses []string
	// AnalysisMemoryBudget bounds, in bytes, the Prometheus answers being
	// read at once by every Rollout together (prometheus.Budget); 0 takes
	// prometheus.DefaultBudget.
	AnalysisMemoryBudget int64
	// NotificationAddresses restricts where the webhooks of
	// spec.notifications may connect (same entries as AnalysisAddresses);
	// empty allows any address.
	NotificationAddresses []string
	// Namespaces are the namespaces the manager watches
	// (--watch-namespaces); empty watches all. They limit the cache, and so
	// every controller and the Pod stores, and the manager's reads of
	// Secrets and ConfigMaps (scopedReader). With namespaces, New first
	// checks that the manager may list and watch what it must in each of
	// them (checkAccess) and fails naming what is missing.
	Namespaces []string
	// Registry receives the controllers' own metrics; controller-runtime's
	// registry, which /metrics serves, when nil. Tests that start managers
	// again in one process give each a private one.
	Registry prometheus.Registerer
}

// Hooks are where a test reaches what the controllers touch outside
// themselves: time, Prometheus, webhook deliveries, the API server. They
// are not options: cmd/manager has no way to set them, and New passes
// none; a test harness passes them to NewWithHooks. Each field is an
// interface or a function, so a hook replaces a collaborator, never a
// branch of the controllers' code.
type Hooks struct {
	// SkipNameValidation lets one process start managers with the same
	// controller names more than once.
	SkipNameValidation bool
	// Clock replaces the real clock of both controllers.
	Clock clock.PassiveClock
	// ProviderFactory replaces how the Rollout reaches Prometheus.
	ProviderFactory rollout.ProviderFactory
	// NotificationPolicy replaces notification.DefaultPolicy (attempts,
	// backoff, timeout of a webhook delivery).
	NotificationPolicy notification.Policy
	// WrapRolloutClient and WrapCloneSetClient wrap a controller's client,
	// to inject API faults (a lost status write, another writer's) around
	// the real one.
	WrapRolloutClient  func(client.Client) client.Client
	WrapCloneSetClient func(client.Client) client.Client
}

// Manager is a controller manager with Stepwise's controllers set up and not
// started yet.
type Manager struct {
	ctrl.Manager
	// CloneSetMetrics and RolloutMetrics are the controllers' own series;
	// nil for a controller that does not run.
	CloneSetMetrics *cloneset.Metrics
	RolloutMetrics  *rollout.Metrics
	// Pods reads the cached Pods, as both controllers do.
	Pods *podcache.Stores
}

// NewScheme knows the built-in types and Stepwise's.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := stepwisev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Stepwise types: %w", err)
	}
	// Rollouts with spec.trafficRouting read and write HTTPRoutes.
	if err := gatewayv1.Install(scheme); err != nil {
		return nil, fmt.Errorf("registering Gateway API types: %w", err)
	}
	return scheme, nil
}

// New creates the manager, its controllers, metrics and health checks, as
// cmd/manager runs it. cfg is how the manager reaches the API server; in a
// cluster, the ServiceAccount of config/rbac.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	return NewWithHooks(cfg, opts, Hooks{})
}

// NewWithHooks is New with a test's hooks in place.
func NewWithHooks(cfg *rest.Config, opts Options, hooks Hooks) (*Manager, error) {
	for _, name := range opts.Controllers {
		if !slices.Contains(Controllers, name) {
			return nil, fmt.Errorf("unknown controller %q (known: %v)", name, Controllers)
		}
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	metricsServer, err := opts.Metrics.serverOptions()
	if err != nil {
		return nil, err
	}
	namespaces, err := checkNamespaces(opts.Namespaces)
	if err != nil {
		return nil, err
	}
	pods := podcache.NewStores()
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsServer,
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		PprofBindAddress:        opts.PprofBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// A new leader starts at once when the old one stops cleanly, and
		// a restarted manager in one test process does not wait out the
		// lease it held.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(GracefulShutdownTimeout),
		Cache:                         cacheOptions(namespaces, pods),
		Client: client.Options{Cache: &client.CacheOptions{
			// Secrets are read rarely (a metric's bearer token, at each
			// measurement) and around the cache: caching them would take
			// list and watch on every Secret of the cluster, and keep them
			// all in memory.
			DisableFor: []client.Object{&corev1.Secret{}},
		}},
	}
	if hooks.SkipNameValidation {
		mgrOpts.Controller = config.Controller{SkipNameValidation: &hooks.SkipNameValidation}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	m := &Manager{Manager: mgr, Pods: pods}
	if len(namespaces) > 0 {
		if err := verifyAccess(mgr, cfg, namespaces); err != nil {
			return nil, err
		}
	}
	if err := index.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	// Secrets and ConfigMaps are read only in the watched namespaces.
	var (
		apiReader  = mgr.GetAPIReader()
		baseClient = mgr.GetClient()
	)
	if len(namespaces) > 0 {
		scope := readScope{namespaces: namespaces, scheme: scheme}
		apiReader = &scopedReader{Reader: apiReader, scope: scope}
		baseClient = &scopedClient{Client: baseClient, scope: scope}
	}

	registry := opts.Registry
	if registry == nil {
		registry = ctrlmetrics.Registry
	}
	if m.runs(opts, CloneSetController) {
		m.CloneSetMetrics = cloneset.NewMetrics()
		if err := register(registry, m.CloneSetMetrics.Collectors()); err != nil {
			return nil, err
		}
		cloneSetClient := client.WithFieldOwner(baseClient, CloneSetFieldOwner)
		if hooks.WrapCloneSetClient != nil {
			cloneSetClient = hooks.WrapCloneSetClient(cloneSetClient)
		}
		if err := (&cloneset.Reconciler{
			Client:    cloneSetClient,
			APIReader: apiReader,
			Scheme:    scheme,
			Recorder:  mgr.GetEventRecorder("stepwise-cloneset"),
			Metrics:   m.CloneSetMetrics,
			Clock:     hooks.Clock,
			Pods:      pods,
		}).SetupWithManager(mgr, orDefault(opts.CloneSetConcurrency, DefaultCloneSetConcurrency)); err != nil {
			return nil, fmt.Errorf("setting up CloneSet controller: %w", err)
		}
	}
	if m.runs(opts, RolloutController) {
		m.RolloutMetrics = rollout.NewMetrics()
		if err := register(registry, m.RolloutMetrics.Collectors()); err != nil {
			return nil, err
		}
		rolloutClient := client.WithFieldOwner(baseClient, RolloutFieldOwner)
		if hooks.WrapRolloutClient != nil {
			rolloutClient = hooks.WrapRolloutClient(rolloutClient)
		}
		recorder := mgr.GetEventRecorder("stepwise-rollout")
		// Webhooks are posted by the Notifier's own workers, never by a
		// reconcile, which only hands it what its status write recorded.
		notifier, err := rollout.NewNotifier(apiReader, recorder, opts.NotificationAddresses, hooks.NotificationPolicy)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(notifier); err != nil {
			return nil, fmt.Errorf("adding the notifier: %w", err)
		}
		if err := (&rollout.Reconciler{
			Client:            rolloutClient,
			APIReader:         apiReader,
			Scheme:            scheme,
			Recorder:          recorder,
			Metrics:           m.RolloutMetrics,
			Clock:             hooks.Clock,
			ProviderFactory:   hooks.ProviderFactory,
			AnalysisAddresses: opts.AnalysisAddresses,
			AnalysisBudget:    analysisprom.NewBudget(orDefault(opts.AnalysisMemoryBudget, analysisprom.DefaultBudget)),
			Notifier:          notifier,
			Pods:              pods,
			Namespaces:        namespaces,
		}).SetupWithManager(mgr, orDefault(opts.RolloutConcurrency, DefaultRolloutConcurrency)); err != nil {
			return nil, fmt.Errorf("setting up Rollout controller: %w", err)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding ready check: %w", err)
	}
	return m, nil
}

func (m *Manager) runs(opts Options, name string) bool {
	return len(opts.Controllers) == 0 || slices.Contains(opts.Controllers, name)
}

func register(r prometheus.Registerer, collectors []prometheus.Collector) error {
	for _, c := range collectors {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering controller metrics: %w", err)
		}
	}
	return nil
}

func orDefault[T int | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
