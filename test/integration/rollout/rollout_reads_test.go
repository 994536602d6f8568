package rollout_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/test/harness"
)

// A round decides from the Rollout as our last write left it. Through a
// release the controller is the Rollout's only writer, so once the cache
// holds the object a status write produced, the next rounds read it there
// instead of asking the API server: the Rollout is read from the API
// server fewer times than its status is written (every round read it
// there before). A change by another writer, here a reconcile request,
// leaves the cache holding an object we did not write: that round reads
// the API server, and handles the request.
func TestRoundsReadTheRolloutFromTheCacheOnceItHoldsOurLastWrite(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pilotedStatefulSet(t, ns, "db", 4, "1.0.0")

	rolloutPath := "/apis/stepwise.dev/v1alpha1/namespaces/" + ns + "/rollouts/db"
	var gets, statusPatches atomic.Int32
	cfg := rest.CopyConfig(env.managerCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return promhttp.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			switch {
			case req.Method == http.MethodGet && req.URL.Path == rolloutPath:
				gets.Add(1)
			case req.Method == http.MethodPatch && req.URL.Path == rolloutPath+"/status":
				statusPatches.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	m, err := harness.StartManagerWithHooks(context.Background(), cfg, manager.Options{
		Controllers: []string{manager.RolloutController},
		Namespaces:  []string{ns},
	}, manager.Hooks{ProviderFactory: fakeProviderFactory})
	if err != nil {
		t.Fatalf("starting manager: %v", err)
	}
	t.Cleanup(m.Stop)

	ref := stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	createRollout(t, newRollout(ns, "db", ref, stepAt(num(3)), stepAt(num(1)), stepAt(num(0))))
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	releaseStatefulSet(t, ns, "db", "2.0.0")
	readFresh, written := gets.Load(), statusPatches.Load()
	t.Logf("through the release: %d reads from the API server, %d status writes", readFresh, written)
	if written < 4 {
		t.Fatalf("the release wrote the status %d times; the test needs a few steps", written)
	}
	if readFresh >= written {
		t.Errorf("the Rollout was read from the API server %d times for %d status writes: rounds after our own write should read the cache", readFresh, written)
	}

	token := annotate(t, ns, "db", meta.ReconcileRequestAnnotation)
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.LastHandledReconcileAt).To(Equal(token))
		kstatusHealthy(g, ro)
	})
	if gets.Load() == readFresh {
		t.Errorf("the reconcile request, another writer's change, was handled without reading the Rollout from the API server")
	}
}
