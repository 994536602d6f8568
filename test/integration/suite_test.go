// Package integration runs the shipped manager (internal/manager, every
// controller) against a real kube-apiserver and etcd (envtest, binaries
// from bin/). There is no kubelet here: tests that
// need Pod status write it themselves, as a kubelet would; whole stories
// with a simulated kubelet live in test/e2e.
package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
)

// env is shared by the package's tests: one API server start per package
// keeps the suite fast. Each test uses its own namespace.
var env struct {
	cfg    *rest.Config
	client client.Client
	// manager runs every controller, set up as cmd/manager sets it up,
	// as the manager's ServiceAccount.
	manager *harness.Manager
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	_, cfg, stop, err := envtestenv.StartSuite()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()

	env.cfg = cfg
	if env.client, err = harness.NewClient(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The manager authenticates as its ServiceAccount, with the RBAC of
	// config/rbac: a rule the controllers lack fails here with a 403.
	mgrCfg, err := shippedrbac.ManagerConfig(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env.manager, err = harness.StartManager(context.Background(), mgrCfg, manager.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.manager.Stop()
	code := m.Run()
	if on, _ := strconv.ParseBool(os.Getenv("KUBE_CACHE_MUTATION_DETECTOR")); on {
		// client-go's cache mutation detector (make test-integration)
		// compares the cache with its copies once a second: give it one
		// more look at the last test's objects before the manager stops.
		time.Sleep(2 * time.Second)
	}
	return code
}

// zapLevel keeps test output to errors unless STEPWISE_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("STEPWISE_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
