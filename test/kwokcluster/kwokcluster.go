// Package kwokcluster starts a simulated Kubernetes cluster for end-to-end
// tests and benchmarks: `kwokctl create cluster --runtime binary` over the
// pinned binaries in bin/ (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok), with the Stages of test/kwok/stages.yaml playing the
// kubelet. Everything listens on 127.0.0.1 and nothing is downloaded.
package kwokcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Pod annotations understood by test/kwok/stages.yaml.
const (
	// AnnotationRestartDelay sets how long a container stays terminated
	// after an image change ("1500ms", "2s", "1m" or seconds; default 1s).
	AnnotationRestartDelay = "stepwise.dev/kwok-restart-delay"
	// AnnotationReady set to "false" keeps the Pod's containers not ready,
	// like a readiness probe that never passes.
	AnnotationReady = "stepwise.dev/kwok-ready"
	// AnnotationResync is what the resync loop touches to give kwok a fresh
	// event for a Pod that looks stuck.
	AnnotationResync = "kwok.stepwise.dev/resync"
)

// PodsPerNode is what a kwokctl node admits.
const PodsPerNode = 110

// binaries kwokctl runs; all must be in the bin directory.
var requiredBinaries = []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Options configures Start. The zero value is a one-node cluster with the
// repository's CRDs and Stages.
type Options struct {
	// Nodes is the number of kwok nodes; 0 means 1. Each admits PodsPerNode Pods.
	Nodes int
	// CRDDir holds CRD manifests to install and wait for; empty means
	// config/crd/bases of the repository.
	CRDDir string
	// SkipCRDs installs no CRDs.
	SkipCRDs bool
	// BinDir holds the binaries; empty means $STEPWISE_BIN, else bin/ of the
	// repository.
	BinDir string
	// StagesFile holds the kwok Stages; empty means test/kwok/stages.yaml of
	// the repository.
	StagesFile string
	// StartTimeout bounds creating the cluster and waiting for it; 0 means 3m.
	StartTimeout time.Duration
	// DisableResync turns off the periodic Pod resync (see resync.go).
	DisableResync bool
	// ResyncInterval is how often the resync loop looks; 0 means 1s.
	ResyncInterval time.Duration
	// ResyncAfter is how long a Pod must look stuck, unchanged, before it is
	// touched; 0 means 3s.
	ResyncAfter time.Duration
	// Logf receives progress and diagnostics (t.Logf fits); nil discards them.
	Logf func(format string, args ...any)
	// NoKwokController runs the control plane without kwok: no kwok nodes,
	// no Stages, no resync. A real kubelet joins instead (test/realnode);
	// kwok, which kwokctl runs with --manage-all-nodes, would take that
	// node over.
	NoKwokController bool
	// APIServerCertSANs are extra names and IPs of the API server's
	// certificate, for clients that reach it by another address (Pods that
	// use the kubernetes Service's ClusterIP).
	APIServerCertSANs []string
	// AuditPolicyFile, when set, is the API server's audit policy; its log
	// is at AuditLogPath. The benchmarks count each client's writes there.
	AuditPolicyFile string
}

// Cluster is a running kwok cluster.
type Cluster struct {
	// Name is the kwokctl cluster name.
	Name string
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// RESTConfig is an admin client configuration for the cluster.
	RESTConfig *rest.Config
	// Workdir is the KWOK_WORKDIR of the cluster, removed by Stop.
	Workdir string

	opts      Options
	binDir    string
	env       []string
	clientset kubernetes.Interface
	reaper    *exec.Cmd

	cancel     context.CancelFunc
	resyncDone chan struct{}
	resyncs    atomic.Int64

	stopOnce sync.Once
	stopErr  error
}

// creating serializes the start of clusters in one test binary (Start).
var creating sync.Mutex

// Start creates a cluster and returns once the API server answers, the nodes
// are Ready and the CRDs are Established. The Pod resync loop runs until ctx
// is done or Stop is called. On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	opts, binDir, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	workdir, err := os.MkdirTemp("", "stepwise-kwok-")
	if err != nil {
		return nil, fmt.Errorf("creating kwok workdir: %w", err)
	}
	name, err := randomName()
	if err != nil {
		_ = os.RemoveAll(workdir)
		return nil, err
	}
	c := &Cluster{
		Name:       name,
		Workdir:    workdir,
		Kubeconfig: filepath.Join(workdir, "clusters", name, "kubeconfig.yaml"),
		opts:       opts,
		binDir:     binDir,
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				c.logf("kwokcluster: cleaning up after a failed start: %v", stopErr)
			}
		}
	}()

	startCtx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	kwokctlConfig, err := c.prepareWorkdir()
	if err != nil {
		return nil, err
	}
	if err := c.startReaper(); err != nil {
		return nil, err
	}

	began := time.Now()
	if err := c.create(startCtx, opts, binDir, kwokctlConfig); err != nil {
		return nil, err
	}
	if !opts.NoKwokController {
		if err := c.ScaleNodes(startCtx, opts.Nodes); err != nil {
			return nil, err
		}
	}
	if err := c.waitServiceAccount(startCtx, metav1.NamespaceDefault); err != nil {
		return nil, err
	}
	if !opts.SkipCRDs {
		if err := c.installCRDs(startCtx, opts.CRDDir); err != nil {
			return nil, err
		}
	}
	c.logf("kwokcluster: cluster %s up with %d node(s) in %s (workdir %s)", name, opts.Nodes, time.Since(began).Round(time.Millisecond), workdir)

	if !opts.DisableResync && !opts.NoKwokController {
		if err := c.startResync(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Clientset is an admin client for the cluster.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Resyncs is how many times the resync loop touched a stuck Pod.
func (c *Cluster) Resyncs() int64 { return c.resyncs.Load() }

// create runs kwokctl create cluster and waits for the API server.
func (c *Cluster) create(ctx context.Context, opts Options, binDir, kwokctlConfig string) error {
	// kwokctl picks each cluster's ports by probing for free ones: two
	// clusters created at once (parallel tests) can pick the same port, and
	// the one that loses the bind waits on the other's API server (x509:
	// signed by unknown authority). Created one at a time, each holds its
	// ports before the next probes.
	creating.Lock()
	defer creating.Unlock()
	var disable []string
	if opts.NoKwokController {
		disable = []string{"--disable", "kwok-controller"}
	}
	if _, err := c.kwokctl(ctx, append([]string{"create", "cluster",
		"--runtime", "binary",
		"--kube-apiserver-binary", filepath.Join(binDir, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(binDir, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(binDir, "kube-scheduler"),
		"--etcd-binary", filepath.Join(binDir, "etcd"),
		"--kwok-controller-binary", filepath.Join(binDir, "kwok"),
		// Our Stages, then our KwokctlConfiguration (loopback, no downloads).
		"-c", opts.StagesFile,
		"-c", kwokctlConfig,
		// Empty: leave ~/.kube/config alone.
		"--kubeconfig=",
		"--quiet-pull",
		"--timeout", opts.StartTimeout.String(),
		"--kube-audit-policy", opts.AuditPolicyFile,
	}, disable...)...); err != nil {
		return err
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig of cluster %s: %w", c.Name, err)
	}
	// The test bed is one process per component on a small machine: client
	// side throttling would only hide what the server does.
	cfg.QPS, cfg.Burst = 1000, 2000
	c.RESTConfig = cfg
	if c.clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("creating clientset: %w", err)
	}

	return c.waitAPIServer(ctx)
}

// LogDir holds one log file per cluster component (kwok-controller.log,
// kube-apiserver.log, ...), until Stop.
func (c *Cluster) LogDir() string { return filepath.Join(c.Workdir, "clusters", c.Name, "logs") }

// AuditLogPath is the API server's audit log (JSON lines), written when
// Options.AuditPolicyFile is set.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.LogDir(), "audit.log") }

// InstallCRDs creates every CRD in dir's YAML and JSON files and waits until
// they are Established (a peer's CRDs, for the side-by-side benchmark).
func (c *Cluster) InstallCRDs(ctx context.Context, dir string) error { return c.installCRDs(ctx, dir) }

// ScaleNodes makes the cluster have exactly n kwok nodes and waits until they
// are all Ready and schedulable.
func (c *Cluster) ScaleNodes(ctx context.Context, n int) error {
	if n < 0 {
		return fmt.Errorf("scaling nodes: negative count %d", n)
	}
	if _, err := c.kwokctl(ctx, "scale", "node", "--replicas", strconv.Itoa(n)); err != nil {
		return err
	}
	return c.waitNodes(ctx, n)
}

// CreateNamespace creates a namespace and waits for its default
// ServiceAccount, without which the API server refuses Pods.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return c.waitServiceAccount(ctx, name)
}

// CreateUniqueNamespace creates a namespace named prefix and a suffix the
// API server picks (generateName), so that callers started together never
// share one, waits for its default ServiceAccount and returns its name.
func (c *Cluster) CreateUniqueNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	created, err := c.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating a namespace named %s-*: %w", prefix, err)
	}
	return created.Name, c.waitServiceAccount(ctx, created.Name)
}

// Stop deletes the cluster, makes sure none of its processes survive and
// removes the workdir. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

// resolve fills in defaults and checks that every file Start needs exists.
func resolve(opts Options) (Options, string, error) {
	if opts.Nodes == 0 && !opts.NoKwokController {
		opts.Nodes = 1
	}
	if opts.NoKwokController && opts.Nodes != 0 {
		return opts, "", fmt.Errorf("kwokcluster: %d kwok nodes asked for without the kwok controller", opts.Nodes)
	}
	if opts.Nodes < 0 {
		return opts, "", fmt.Errorf("kwokcluster: negative node count %d", opts.Nodes)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = time.Second
	}
	if opts.ResyncAfter == 0 {
		opts.ResyncAfter = 3 * time.Second
	}
	needRoot := (opts.BinDir == "" && os.Getenv("STEPWISE_BIN") == "") ||
		opts.StagesFile == "" || (!opts.SkipCRDs && opts.CRDDir == "")
	var root string
	if needRoot {
		var err error
		if root, err = envtestenv.RepoRoot(); err != nil {
			return opts, "", err
		}
	}
	binDir := opts.BinDir
	if binDir == "" {
		binDir = os.Getenv("STEPWISE_BIN")
	}
	if binDir == "" {
		binDir = filepath.Join(root, "bin")
	}
	if opts.StagesFile == "" {
		opts.StagesFile = filepath.Join(root, "test", "kwok", "stages.yaml")
	}
	if opts.CRDDir == "" && !opts.SkipCRDs {
		opts.CRDDir = filepath.Join(root, "config", "crd", "bases")
	}

	var err error
	if binDir, err = filepath.Abs(binDir); err != nil {
		return opts, "", fmt.Errorf("kwokcluster: bin dir: %w", err)
	}
	if opts.StagesFile, err = filepath.Abs(opts.StagesFile); err != nil {
		return opts, "", fmt.Errorf("kwokcluster: stages file: %w", err)
	}
	var missing []string
	for _, b := range requiredBinaries {
		if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return opts, "", fmt.Errorf("kwokcluster: %s missing from %s (run `make test-assets`)", strings.Join(missing, ", "), binDir)
	}
	if _, err := os.Stat(opts.StagesFile); err != nil {
		return opts, "", fmt.Errorf("kwokcluster: stages file: %w", err)
	}
	return opts, binDir, nil
}

// InstallGatewayAPI installs envtestenv.GatewayAPICRDs into a kwok cluster. The
// module's folder also holds a ValidatingAdmissionPolicy and experimental
// kinds: only the CRDs the code uses are copied to a folder of their own.
func InstallGatewayAPI(ctx context.Context, c *Cluster) error {
	files, err := envtestenv.GatewayAPICRDs()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "stepwise-gateway-api-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o600); err != nil {
			return err
		}
	}
	return c.InstallCRDs(ctx, dir)
}

// kwokctlConfigTemplate is our KwokctlConfiguration. It binds every
// component to loopback and names a kubectl, which is all the binary runtime
// needs besides the --*-binary flags to never reach for the network (read in
// kwokctl v0.8.0: EnsureBinary only downloads http(s) sources, and kubectl
// is looked up in PATH before kubectlBinary is fetched).
const kwokctlConfigTemplate = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubectlBinary: %q
  disableQPSLimits: true
`

// kubectlStandIn replaces kubectl for kwokctl. The binary runtime runs
// `kubectl get --raw /version` only to wait until the API server serves, and
// downloads kubectl when none is in PATH. Start does that wait itself with
// client-go, so the stand-in only has to succeed.
const kubectlStandIn = `#!/bin/sh
# kubectl stand-in written by test/kwokcluster for kwokctl's readiness probe.
exit 0
`

// kwokctl runs one kwokctl command for this cluster and returns its output.
func (c *Cluster) kwokctl(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--name", c.Name)
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "kwokctl"), args...)
	cmd.Env = c.env
	cmd.Dir = c.Workdir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// kwokctl's children detach themselves (setsid); a killed kwokctl must
	// not take its pipes' readers with it.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 40))
	}
	return out.String(), nil
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
