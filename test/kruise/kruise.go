// Package kruise runs OpenKruise v1.9.0's manager off-cluster, in its
// local-debug mode, against a cluster of the test beds (kwok or the real
// node): its CRDs and webhook configurations come from the module cache
// where hack/kruise pins it, its binary from `make kruise-manager`.
package kruise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// Namespace is where the manager believes it runs (POD_NAMESPACE).
const Namespace = "kruise-system"

var (
	// CloneSets is v1beta1, OpenKruise v1.9's stored version; its CRD
	// converts nothing, so a v1alpha1 updateStrategy would be lost.
	CloneSets          = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "clonesets"}
	mutatingWebhooks   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	validatingWebhooks = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// ModuleDir is where the Go module cache holds OpenKruise, as hack/kruise
// pins it.
func ModuleDir() (string, error) {
	root, err := envtestenv.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openkruise/kruise")
	cmd.Dir = filepath.Join(root, "hack", "kruise")
	out, err := cmd.Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return "", fmt.Errorf("finding OpenKruise in the module cache (make kruise-manager downloads it): %w", err)
	}
	return string(bytes.TrimSpace(out)), nil
}

// Binary is the manager: bin/kruise-manager, or in $STEPWISE_BIN.
func Binary() (string, error) {
	dir := os.Getenv("STEPWISE_BIN")
	if dir == "" {
		root, err := envtestenv.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	binary := filepath.Join(dir, "kruise-manager")
	if _, err := os.Stat(binary); err != nil {
		return "", fmt.Errorf("OpenKruise manager: %w (make kruise-manager builds it)", err)
	}
	return binary, nil
}

// Install puts into the cluster what the local-debug mode needs: the CRDs,
// the namespace, and the two webhook configurations under the names the
// manager looks for (it fills in the CA bundle and the 127.0.0.1 URL). The
// returned function deletes the webhook configurations again: once the
// manager has stopped they would refuse every Pod created after it.
func Install(ctx context.Context, cluster *kwokcluster.Cluster) (uninstall func(context.Context) error, err error) {
	dir, err := ModuleDir()
	if err != nil {
		return nil, err
	}
	if err := cluster.InstallCRDs(ctx, filepath.Join(dir, "config", "crd", "bases")); err != nil {
		return nil, err
	}
	if err := cluster.CreateNamespace(ctx, Namespace); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig)
	if err != nil {
		return nil, err
	}
	type created struct {
		gvr  schema.GroupVersionResource
		name string
	}
	var made []created
	uninstall = func(ctx context.Context) error {
		var errs []error
		for _, c := range made {
			if err := dyn.Resource(c.gvr).Delete(ctx, c.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			break
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvr := mutatingWebhooks
		if u.GetKind() == "ValidatingWebhookConfiguration" {
			gvr = validatingWebhooks
		}
		u.SetName("kruise-" + u.GetName())
		if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s: %w", u.GetName(), err)
		}
		made = append(made, created{gvr: gvr, name: u.GetName()})
	}
	return uninstall, nil
}

// Addrs are where the manager listens, all on 127.0.0.1.
type Addrs struct {
	WebhookPort          string // the port alone
	Metrics, HealthProbe string // host:port
}

// Command is the manager's environment (besides the process's own) and
// arguments: the webhook on 127.0.0.1 with certificates in certDir, no
// leader election, no daemon, and the client QPS flags given.
func Command(kubeconfig, certDir string, addrs Addrs, qps []string) (env, args []string) {
	env = []string{"KUBECONFIG=" + kubeconfig, "WEBHOOK_HOST=127.0.0.1", "WEBHOOK_PORT=" + addrs.WebhookPort,
		"WEBHOOK_CERT_DIR=" + certDir, "POD_NAMESPACE=" + Namespace}
	args = append([]string{"--enable-leader-election=false", "--metrics-addr=" + addrs.Metrics, "--health-probe-addr=" + addrs.HealthProbe,
		"--enable-pprof=false", "--feature-gates=CloneSetPartitionRollback=true,KruiseDaemon=false", "--v=1"}, qps...)
	return env, args
}
