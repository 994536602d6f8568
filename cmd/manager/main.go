// Command manager runs the Stepwise controllers. It parses flags and hands
// them to internal/manager, which sets everything up.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stepwise-dev/stepwise/controllers/rollout"
	"github.com/stepwise-dev/stepwise/controllers/rollout/notification"
	"github.com/stepwise-dev/stepwise/internal/manager"
	analysisprom "github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	var (
		opts        manager.Options
		secure      bool
		controllers string
		// oldFlag: the namespaces came from --namespaces.
		oldFlag bool
	)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.StringVar(&opts.Metrics.BindAddress, "metrics-bind-address", ":8443", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	flag.BoolVar(&secure, "metrics-secure", true, "Serve /metrics over HTTPS to callers the API server authenticates and authorizes (ClusterRole stepwise-metrics-reader); false serves plain HTTP to anyone.")
	flag.StringVar(&opts.Metrics.CertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for /metrics; a self-signed certificate when empty.")
	flag.BoolVar(&opts.Metrics.EnableHTTP2, "enable-http2", false, "Offer HTTP/2 on the metrics endpoint (off: HTTP/2 Rapid Reset, CVE-2023-44487).")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.StringVar(&opts.PprofBindAddress, "pprof-bind-address", "", "Address of Go's /debug/pprof profiles, such as 127.0.0.1:8082; empty disables them. They are served to anyone who can connect.")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader so only one replica reconciles.")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease; the Pod's namespace when empty.")
	flag.IntVar(&opts.CloneSetConcurrency, "cloneset-concurrency", manager.DefaultCloneSetConcurrency, "CloneSets reconciled in parallel.")
	flag.IntVar(&opts.RolloutConcurrency, "rollout-concurrency", manager.DefaultRolloutConcurrency, "Rollouts reconciled in parallel; a query to a slow Prometheus holds one worker for up to its analysis interval (at most 30s).")
	flag.Func(rollout.AnalysisAddressesFlag, "Prometheus addresses analysis may query, comma-separated or repeated: URL prefixes (https://thanos.example/tenant-a) or hosts (prometheus.monitoring:9090). Unset: any address. See docs/security.md.", func(v string) error {
		opts.AnalysisAddresses = append(opts.AnalysisAddresses, strings.Split(v, ",")...)
		return nil
	})
	watchNamespaces := func(v string) error {
		for ns := range strings.SplitSeq(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				opts.Namespaces = append(opts.Namespaces, ns)
			}
		}
		return nil
	}
	flag.Func(manager.WatchNamespacesFlag, "Namespaces the manager watches, comma-separated or repeated: its cache, Pods, Secrets and ConfigMaps; it checks at start that it may list and watch what it needs in each. Unset: every namespace. The Lease stays in --leader-election-namespace.", watchNamespaces)
	flag.Func("namespaces", "Deprecated: --"+manager.WatchNamespacesFlag+".", func(v string) error {
		oldFlag = true
		return watchNamespaces(v)
	})
	flag.Func(notification.AllowedAddressesFlag, "Addresses the webhooks of spec.notifications may post to, comma-separated or repeated: URL prefixes (https://hooks.slack.com/services) or hosts (alertmanager.monitoring:9093). Unset: any address. See docs/notifications.md.", func(v string) error {
		opts.NotificationAddresses = append(opts.NotificationAddresses, strings.Split(v, ",")...)
		return nil
	})
	flag.Int64Var(&opts.AnalysisMemoryBudget, "analysis-memory-budget", analysisprom.DefaultBudget, "Bytes of Prometheus answers all Rollouts together may be reading at once; an answer that does not fit is an Error measurement. See docs/analysis.md#cost-per-tenant.")
	flag.StringVar(&controllers, "controllers", strings.Join(manager.Controllers, ","), "Controllers to run, comma-separated: cloneset, rollout.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	setupLog := ctrl.Log.WithName("setup")
	if oldFlag {
		setupLog.Info("--namespaces is deprecated and will be removed: use --" + manager.WatchNamespacesFlag)
	}

	opts.Metrics.Insecure = !secure
	for name := range strings.SplitSeq(controllers, ",") {
		if name = strings.TrimSpace(name); name != "" {
			opts.Controllers = append(opts.Controllers, name)
		}
	}
	if len(opts.Controllers) == 0 {
		return fmt.Errorf("--controllers names no controller")
	}

	if percent, ok := manager.GCPercent(os.Getenv); ok {
		debug.SetGCPercent(percent)
		setupLog.Info("Go garbage collector target set (GOGC unset)", "percent", percent)
	}
	limit, ok, err := manager.SoftMemoryLimit(os.Getenv)
	if err != nil {
		return err
	}
	if ok {
		debug.SetMemoryLimit(limit)
		setupLog.Info("Go soft memory limit set to 90% of the container's", "bytes", limit)
	}

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig (--kubeconfig, $KUBECONFIG or in-cluster): %w", err)
	}
	mgr, err := manager.New(restConfig, opts)
	if err != nil {
		return err
	}
	setupLog.Info("starting manager", "controllers", opts.Controllers, "secureMetrics", secure, "watchNamespaces", opts.Namespaces)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}
