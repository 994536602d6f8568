// Package harness starts the Stepwise controllers in-process against any
// API server (envtest or a kwok cluster) for tests, benchmarks and the demo.
package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/cloneset"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
)

// NewScheme knows the built-in types and Stepwise's.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := stepwisev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Stepwise types: %w", err)
	}
	return scheme, nil
}

// NewClient is an uncached client for test assertions.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// Manager is a running controller manager that can be stopped and started
// again, to test what survives a restart.
type Manager struct {
	// Metrics are the controllers' metrics of this run, registered in a
	// private registry so restarts don't collide.
	Metrics        *cloneset.Metrics
	RolloutMetrics *rollout.Metrics
	Registry       *prometheus.Registry

	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	exitErr error
}

// StartManager runs the controllers until Stop. It returns once the caches
// are synced, so a test can act right away.
func StartManager(ctx context.Context, cfg *rest.Config) (*Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	skipNameValidation := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		// A restarted manager in the same process registers the same
		// controller names again.
		Controller: config.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	m := &Manager{Metrics: cloneset.NewMetrics(), RolloutMetrics: rollout.NewMetrics(), Registry: prometheus.NewRegistry(), done: make(chan error, 1)}
	m.Registry.MustRegister(m.Metrics.Collectors()...)
	m.Registry.MustRegister(m.RolloutMetrics.Collectors()...)
	if err := (&cloneset.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    scheme,
		Recorder:  mgr.GetEventRecorder("stepwise-cloneset"),
		Metrics:   m.Metrics,
	}).SetupWithManager(mgr, 4); err != nil {
		return nil, fmt.Errorf("setting up CloneSet controller: %w", err)
	}
	if err := (&rollout.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    scheme,
		Recorder:  mgr.GetEventRecorder("stepwise-rollout"),
		Metrics:   m.RolloutMetrics,
	}).SetupWithManager(mgr, 2); err != nil {
		return nil, fmt.Errorf("setting up Rollout controller: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	go func() { m.done <- mgr.Start(runCtx) }()
	if !mgr.GetCache().WaitForCacheSync(runCtx) {
		m.Stop()
		return nil, errors.New("manager caches did not sync")
	}
	return m, nil
}

// ExitErr is what the manager returned when it stopped, nil before Stop.
func (m *Manager) ExitErr() error { return m.exitErr }

// Stop ends the manager and waits for it. Safe to call more than once.
func (m *Manager) Stop() {
	m.once.Do(func() {
		m.cancel()
		// Kept, not returned: Stop runs from cleanups with nobody to tell.
		m.exitErr = <-m.done
	})
}
