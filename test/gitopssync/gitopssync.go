// Package gitopssync is a small GitOps tool for tests: a git repository
// (go-git, in memory) holds manifests, and a Syncer applies the commit at
// HEAD to a cluster, once per Sync call (a commit, a webhook) and again on a
// timer (Flux's interval, Argo CD's self-heal), which corrects drift.
//
// It applies the way the real tools do, with their libraries where they
// are libraries:
//   - ServerSideApply is Flux's kustomize-controller: github.com/fluxcd/pkg/ssa's
//     ResourceManager (dry-run, drift check, forced server-side apply,
//     ApplyAllStaged) with field manager "kustomize-controller", Flux's
//     owner labels and Flux's managed-fields cleanup.
//   - ClientSideApply is Argo CD's default sync: kubectl apply's three-way
//     JSON merge patch between the kubectl.kubernetes.io/last-applied-configuration
//     annotation, the manifest and the live object, sent as field manager
//     "argocd-controller" (an Update in managedFields). Argo CD's
//     ignoreDifferences, with or without RespectIgnoreDifferences=true, is
//     modelled too, see Options.
//
// What it leaves out: kustomize builds, pruning, health checks (tests
// compute those with kstatus and Argo CD's Lua themselves), sync waves.
//
// The real tools drive Stepwise in test/gitops (make test-gitops): Flux's
// source- and kustomize-controller and Argo CD's application controller
// and repo server, from a git server, through the stories of issue 36.
// This package stays for test/e2e's TestGitOps, which needs what a real
// tool does not give a test: a sync at a moment the test chooses (once per
// second, dozens of re-applies per release), Argo CD's client-side apply
// next to Flux's server-side apply on the same history, and every version
// of the Rollout and the CloneSet scored as it happens by kstatus and the
// Lua, where the real tools only show their aggregated verdict.
package gitopssync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/go-git/go-git/v5/plumbing"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Mode is how a Syncer applies, that is, which tool it stands for.
type Mode string

const (
	// ServerSideApply applies as Flux's kustomize-controller.
	ServerSideApply Mode = "server-side-apply"
	// ClientSideApply applies as Argo CD does by default.
	ClientSideApply Mode = "client-side-apply"
)

// Field managers of the tools.
const (
	FluxFieldManager   = "kustomize-controller"
	ArgoCDFieldManager = "argocd-controller"
)

// Options configure a Syncer.
type Options struct {
	// Repo holds the manifests; Path is the directory whose *.yaml and
	// *.yml files are applied ("" for the whole repository).
	Repo *Repo
	Path string
	// Client writes to the cluster.
	Client client.Client
	Mode   Mode
	// FieldManager defaults to FluxFieldManager or ArgoCDFieldManager.
	FieldManager string
	// Interval between two applies of HEAD when nothing asked for one; 0
	// applies only on Sync.
	Interval time.Duration
	// Name and Namespace of the Flux Kustomization the objects are labelled
	// with (ServerSideApply); "gitops" in "flux-system" when empty.
	Name, Namespace string
	// IgnoreDifferences are JSON pointers (/spec/updateStrategy/partition)
	// that Argo CD's diff leaves out (ClientSideApply only): an object whose
	// only differences are there is in sync and not applied.
	IgnoreDifferences []string
	// RespectIgnoreDifferences is Argo CD's sync option of that name: a sync
	// keeps the live values of IgnoreDifferences instead of writing git's.
	// Without it, a sync (caused by any other difference) writes the whole
	// manifest, ignored fields included.
	RespectIgnoreDifferences bool
	// Logf, when set, receives a line per apply that changed something.
	Logf func(format string, args ...any)
}

// Run is one apply of a revision.
type Run struct {
	Revision plumbing.Hash
	// Trigger is "sync" (asked for) or "interval" (the timer).
	Trigger       string
	Started, Done time.Time
	// Actions maps "Kind/name" to created, configured or unchanged.
	Actions map[string]string
	Err     error
}

// Syncer applies a Repo to a cluster. Applies never overlap: each runs to
// its end before the next, as one Flux Kustomization or Argo CD Application
// is reconciled by one worker at a time.
type Syncer struct {
	opts Options
	ssa  *ssa.ResourceManager

	// applyMu serialises applies.
	applyMu sync.Mutex

	mu   sync.Mutex
	runs []Run

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start applies HEAD once and, with an Interval, keeps applying it until Stop.
func Start(ctx context.Context, opts Options) (*Syncer, error) {
	if opts.Repo == nil || opts.Client == nil {
		return nil, errors.New("gitopssync: Repo and Client are required")
	}
	switch opts.Mode {
	case ServerSideApply:
		if opts.FieldManager == "" {
			opts.FieldManager = FluxFieldManager
		}
		if len(opts.IgnoreDifferences) > 0 {
			return nil, errors.New("gitopssync: IgnoreDifferences models Argo CD; use it with ClientSideApply")
		}
	case ClientSideApply:
		if opts.FieldManager == "" {
			opts.FieldManager = ArgoCDFieldManager
		}
	default:
		return nil, fmt.Errorf("gitopssync: unknown mode %q", opts.Mode)
	}
	if opts.Name == "" {
		opts.Name = "gitops"
	}
	if opts.Namespace == "" {
		opts.Namespace = "flux-system"
	}
	s := &Syncer{opts: opts, done: make(chan struct{})}
	// No status poller: ApplyAllStaged needs one only to wait for CRDs and
	// Namespaces, which objects refuses.
	s.ssa = ssa.NewResourceManager(opts.Client, nil, ssa.Owner{Field: opts.FieldManager, Group: "kustomize.toolkit.fluxcd.io"})
	if _, err := s.Sync(ctx); err != nil {
		return nil, err
	}
	// The timer outlives ctx, often a (sub)test's context, until Stop.
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.loop(loopCtx)
	return s, nil
}

// Stop ends the timer and waits for an apply in flight. Safe to call twice.
func (s *Syncer) Stop() {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
}

func (s *Syncer) loop(ctx context.Context) {
	defer close(s.done)
	if s.opts.Interval <= 0 {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// Errors are kept in Runs; a test asserts on them.
			_, _ = s.apply(ctx, "interval")
		}
	}
}

// Sync applies HEAD now and returns when done, as a webhook from the git
// host (or `flux reconcile`, `argocd app sync`) would have it.
func (s *Syncer) Sync(ctx context.Context) (Run, error) {
	return s.apply(ctx, "sync")
}

// Runs returns every apply so far, oldest first.
func (s *Syncer) Runs() []Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Run, len(s.runs))
	copy(out, s.runs)
	return out
}

// FieldManager is the field manager the Syncer writes as.
func (s *Syncer) FieldManager() string { return s.opts.FieldManager }

// Mode is how the Syncer applies.
func (s *Syncer) Mode() Mode { return s.opts.Mode }

func (s *Syncer) apply(ctx context.Context, trigger string) (Run, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	run := Run{Trigger: trigger, Started: time.Now(), Actions: map[string]string{}}
	run.Err = s.applyHead(ctx, &run)
	run.Done = time.Now()
	if ctx.Err() != nil && run.Err != nil {
		// Stopped mid-apply: not a failure of the tool.
		return run, run.Err
	}
	s.mu.Lock()
	s.runs = append(s.runs, run)
	s.mu.Unlock()
	if s.opts.Logf != nil && (run.Err != nil || changed(run.Actions)) {
		s.opts.Logf("gitopssync %s (%s) %s %s: %v, err=%v", s.opts.Mode, trigger, short(run.Revision), s.opts.Repo.Message(run.Revision), run.Actions, run.Err)
	}
	return run, run.Err
}

func changed(actions map[string]string) bool {
	for _, a := range actions {
		if a != string(ssa.UnchangedAction) {
			return true
		}
	}
	return false
}

func short(h plumbing.Hash) string { return h.String()[:7] }

func (s *Syncer) applyHead(ctx context.Context, run *Run) error {
	snap, err := s.opts.Repo.Checkout(s.opts.Path)
	if err != nil {
		return err
	}
	run.Revision = snap.Revision
	objs, err := objects(snap)
	if err != nil {
		return err
	}
	if s.opts.Mode == ServerSideApply {
		return s.serverSideApply(ctx, objs, run)
	}
	var errs []error
	for _, o := range objs {
		action, err := s.clientSideApply(ctx, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key(o), err))
			continue
		}
		run.Actions[key(o)] = action
	}
	return errors.Join(errs...)
}

func key(o *unstructured.Unstructured) string { return o.GetKind() + "/" + o.GetName() }

// objects decodes every manifest of a snapshot, files in path order.
func objects(snap Snapshot) ([]*unstructured.Unstructured, error) {
	paths := make([]string, 0, len(snap.Files))
	for p := range snap.Files {
		if ext := path.Ext(p); ext == ".yaml" || ext == ".yml" {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var out []*unstructured.Unstructured
	for _, p := range paths {
		objs, err := ssautils.ReadObjects(bytes.NewReader(snap.Files[p]))
		if err != nil {
			return nil, fmt.Errorf("decoding %s at %s: %w", p, short(snap.Revision), err)
		}
		for _, o := range objs {
			if ssautils.IsClusterDefinition(o) {
				return nil, fmt.Errorf("%s: %s is cluster-wide; this syncer applies namespaced objects only", p, key(o))
			}
		}
		out = append(out, objs...)
	}
	return out, nil
}

// serverSideApply is kustomize-controller's apply: owner labels, the
// cleanup of managers that wrote before Flux did, then ApplyAllStaged with
// forced ownership of every field in the manifests, skipping objects whose
// dry-run shows no drift.
func (s *Syncer) serverSideApply(ctx context.Context, objs []*unstructured.Unstructured, run *Run) error {
	s.ssa.SetOwnerLabels(objs, s.opts.Name, s.opts.Namespace)
	opts := ssa.DefaultApplyOptions()
	opts.Cleanup = ssa.ApplyCleanupOptions{
		Annotations: []string{corev1.LastAppliedConfigAnnotation},
		FieldManagers: []ssa.FieldManager{
			// kubectl apply --server-side, kubectl apply, kubectl edit...
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
			// the controller's own writes from before it used SSA
			{Name: s.opts.FieldManager, OperationType: metav1.ManagedFieldsOperationUpdate},
		},
	}
	cs, err := s.ssa.ApplyAllStaged(ctx, objs, opts)
	if cs != nil {
		for _, e := range cs.Entries {
			run.Actions[e.ObjMetadata.GroupKind.Kind+"/"+e.ObjMetadata.Name] = string(e.Action)
		}
	}
	if err != nil {
		return fmt.Errorf("server-side apply: %w", err)
	}
	return nil
}

// String describes the run for test failures.
func (r Run) String() string {
	keys := make([]string, 0, len(r.Actions))
	for k := range r.Actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s:", r.Started.Format("15:04:05.000"), r.Trigger, short(r.Revision))
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, r.Actions[k])
	}
	if r.Err != nil {
		fmt.Fprintf(&b, " error: %v", r.Err)
	}
	return b.String()
}
