package manager

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// recordingSink stands in for the events.k8s.io endpoint: it keeps what
// the broadcaster created and which Events it patched into a series.
type recordingSink struct {
	mu      sync.Mutex
	created []*eventsv1.Event
	patched []string
}

func (s *recordingSink) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, ev.DeepCopy())
	return ev, nil
}

func (s *recordingSink) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return ev, nil
}

func (s *recordingSink) Patch(_ context.Context, old *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patched = append(s.patched, old.Name)
	return old, nil
}

func (s *recordingSink) counts() (created, patched int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.created), len(s.patched)
}

// One transition told by two reconciles, one of which read the object a
// write behind, is one Event with a series, not two Events.
func TestVersionlessRecorderFoldsRepeatsAcrossVersions(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := stepwisev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cloneSetAt := func(rv string) *stepwisev1.CloneSet {
		return &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web", ResourceVersion: rv}}
	}
	for _, tt := range []struct {
		name        string
		wrap        func(events.EventRecorder) events.EventRecorder
		wantCreated int
		wantPatched int
	}{
		{name: "client-go alone keeps one Event per version", wrap: func(r events.EventRecorder) events.EventRecorder { return r }, wantCreated: 2},
		{name: "versionless folds them into a series", wrap: func(r events.EventRecorder) events.EventRecorder { return versionlessRecorder{r} }, wantCreated: 1, wantPatched: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sink := &recordingSink{}
			broadcaster := events.NewBroadcaster(sink)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			defer broadcaster.Shutdown()
			g.Expect(broadcaster.StartRecordingToSinkWithContext(ctx)).To(Succeed())
			recorder := tt.wrap(broadcaster.NewRecorder(scheme, "stepwise-cloneset"))

			first := cloneSetAt("41")
			recorder.Eventf(first, nil, "Normal", stepwisev1.EventGoverned, stepwisev1.EventGoverned, "Rollout %s now decides how far Pods move", "web")
			recorder.Eventf(cloneSetAt("42"), nil, "Normal", stepwisev1.EventGoverned, stepwisev1.EventGoverned, "Rollout %s now decides how far Pods move", "web")

			g.Eventually(func() int { c, p := sink.counts(); return c + p }, 5*time.Second, 10*time.Millisecond).Should(Equal(2))
			g.Consistently(func() int { c, p := sink.counts(); return c + p }, 200*time.Millisecond, 10*time.Millisecond).Should(Equal(2))
			created, patched := sink.counts()
			g.Expect(created).To(Equal(tt.wantCreated))
			g.Expect(patched).To(Equal(tt.wantPatched))
			g.Expect(first.ResourceVersion).To(Equal("41"), "the caller's object is not changed")
			sink.mu.Lock()
			defer sink.mu.Unlock()
			g.Expect(sink.created[0].Regarding.Name).To(Equal("web"))
			g.Expect(sink.created[0].Regarding.UID).To(BeEquivalentTo("uid-web"))
		})
	}
}

func TestWithoutResourceVersionKeepsNil(t *testing.T) {
	if got := withoutResourceVersion(nil); got != nil {
		t.Fatalf("withoutResourceVersion(nil) = %#v, want nil", got)
	}
}
