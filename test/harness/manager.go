// Package harness starts the Stepwise manager in-process against any API
// server (envtest or a kwok cluster) for tests, benchmarks and the demo. The
// manager is internal/manager's, as cmd/manager runs it; the harness only
// turns off the metrics endpoint, gives each run a private Prometheus
// registry and lets a restarted manager reuse its controller names.
package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/controllers/cloneset"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
	"github.com/stepwise-dev/stepwise/internal/manager"
)

// NewScheme knows the built-in types and Stepwise's.
func NewScheme() (*runtime.Scheme, error) { return manager.NewScheme() }

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
	// Metrics are the controllers' metrics of this run, registered in
	// Registry, private to the run so restarts don't collide.
	Metrics        *cloneset.Metrics
	RolloutMetrics *rollout.Metrics
	Registry       *prometheus.Registry
	// Manager is the running manager, for its cache and clients.
	Manager *manager.Manager

	cancel context.CancelFunc
	// stopped is closed when the manager has returned exitErr.
	stopped chan struct{}
	exitErr error
}

// syncTimeout bounds the wait for the caches. A manager whose RBAC lacks a
// list or watch never syncs: its controllers give up after
// controller-runtime's own two minutes, and the manager's error says which
// kind did not sync.
const syncTimeout = 3 * time.Minute

// StartManager runs the shipped manager until Stop. opts are
// internal/manager's; the harness sets the metrics address ("0" unless
// given), a private registry and SkipNameValidation. It returns once the
// caches are synced, so a test can act right away.
func StartManager(ctx context.Context, cfg *rest.Config, opts manager.Options) (*Manager, error) {
	return StartManagerWithHooks(ctx, cfg, opts, manager.Hooks{})
}

// StartManagerWithHooks is StartManager with a test's hooks in place.
func StartManagerWithHooks(ctx context.Context, cfg *rest.Config, opts manager.Options, hooks manager.Hooks) (*Manager, error) {
	if opts.Metrics.BindAddress == "" {
		opts.Metrics.BindAddress = "0"
	}
	registry := prometheus.NewRegistry()
	opts.Registry = registry
	// A restarted manager in the same process registers the same
	// controller names again.
	hooks.SkipNameValidation = true
	mgr, err := manager.NewWithHooks(cfg, opts, hooks)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		Metrics:        mgr.CloneSetMetrics,
		RolloutMetrics: mgr.RolloutMetrics,
		Registry:       registry,
		Manager:        mgr,
		stopped:        make(chan struct{}),
	}
	runCtx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	go func() {
		m.exitErr = mgr.Start(runCtx)
		close(m.stopped)
	}()
	syncCtx, cancelSync := context.WithTimeout(runCtx, syncTimeout)
	defer cancelSync()
	go func() {
		select {
		case <-m.stopped:
			cancelSync()
		case <-syncCtx.Done():
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		m.Stop()
		if m.exitErr != nil {
			return nil, fmt.Errorf("manager caches did not sync: %w", m.exitErr)
		}
		return nil, errors.New("manager caches did not sync")
	}
	return m, nil
}

// ExitErr is what the manager returned when it stopped, nil before Stop.
func (m *Manager) ExitErr() error {
	select {
	case <-m.stopped:
		return m.exitErr
	default:
		return nil
	}
}

// Stop ends the manager and waits for it. Safe to call more than once.
func (m *Manager) Stop() {
	// Kept, not returned: Stop runs from cleanups with nobody to tell.
	m.cancel()
	<-m.stopped
}
