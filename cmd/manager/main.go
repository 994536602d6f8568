// Command manager runs the Stepwise controllers.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/cloneset"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr         string
		probeAddr           string
		leaderElect         bool
		leaderElectionNS    string
		cloneSetConcurrency int
		rolloutConcurrency  int
	)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so only one replica reconciles.")
	flag.StringVar(&leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader-election Lease; the Pod's namespace when empty.")
	flag.IntVar(&cloneSetConcurrency, "cloneset-concurrency", 4, "CloneSets reconciled in parallel.")
	flag.IntVar(&rolloutConcurrency, "rollout-concurrency", rollout.DefaultConcurrency, "Rollouts reconciled in parallel; a query to a slow Prometheus holds one worker for up to its analysis interval (at most 30s).")
	var analysisAddresses []string
	flag.Func(rollout.AnalysisAddressesFlag, "Prometheus addresses analysis may query, comma-separated or repeated: URL prefixes (https://thanos.example/tenant-a) or hosts (prometheus.monitoring:9090). Unset: any address. See docs/security.md.", func(v string) error {
		analysisAddresses = append(analysisAddresses, strings.Split(v, ",")...)
		return nil
	})
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig (--kubeconfig, $KUBECONFIG or in-cluster): %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := stepwisev1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("registering Stepwise types: %w", err)
	}

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "stepwise-manager.stepwise.dev",
		LeaderElectionNamespace: leaderElectionNS,
		// Managed fields are large and never read here: stripping them
		// roughly halves the memory of the Pod cache.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		Client: client.Options{Cache: &client.CacheOptions{
			// Secrets are read rarely (analysis credentials); caching
			// them cluster-wide would need list/watch on every Secret.
			DisableFor: []client.Object{&corev1.Secret{}},
		}},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	cloneSetMetrics := cloneset.NewMetrics()
	ctrlmetrics.Registry.MustRegister(cloneSetMetrics.Collectors()...)
	if err := (&cloneset.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Recorder:  mgr.GetEventRecorder("stepwise-cloneset"),
		Metrics:   cloneSetMetrics,
	}).SetupWithManager(mgr, cloneSetConcurrency); err != nil {
		return fmt.Errorf("setting up CloneSet controller: %w", err)
	}

	rolloutMetrics := rollout.NewMetrics()
	ctrlmetrics.Registry.MustRegister(rolloutMetrics.Collectors()...)
	if err := (&rollout.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Recorder:  mgr.GetEventRecorder("stepwise-rollout"),
		Metrics:   rolloutMetrics,

		AnalysisAddresses: analysisAddresses,
	}).SetupWithManager(mgr, rolloutConcurrency); err != nil {
		return fmt.Errorf("setting up Rollout controller: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	ctrl.Log.WithName("setup").Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}
