package kwokcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// poll calls cond every interval until it reports done or ctx ends; the
// error then names what was awaited and the last thing that went wrong.
func poll(ctx context.Context, interval time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var last error
	for {
		done, err := cond(ctx)
		if done {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-ticker.C:
		}
	}
}

func (c *Cluster) waitAPIServer(ctx context.Context) error {
	return poll(ctx, 250*time.Millisecond, "the API server to be ready", func(ctx context.Context) (bool, error) {
		body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		if strings.TrimSpace(string(body)) != "ok" {
			return false, fmt.Errorf("readyz: %s", body)
		}
		return true, nil
	})
}

// waitNodes waits until there are exactly n nodes, all Ready and free of
// the taints the node lifecycle controller puts on nodes it doubts.
func (c *Cluster) waitNodes(ctx context.Context, n int) error {
	return poll(ctx, 500*time.Millisecond, fmt.Sprintf("%d Ready node(s)", n), func(ctx context.Context) (bool, error) {
		nodes, err := c.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range nodes.Items {
			if nodeUsable(&nodes.Items[i]) {
				ready++
			}
		}
		if len(nodes.Items) == n && ready == n {
			return true, nil
		}
		return false, fmt.Errorf("%d node(s), %d usable", len(nodes.Items), ready)
	})
}

func nodeUsable(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitServiceAccount waits for the namespace's default ServiceAccount, which
// the controller manager creates and Pod admission insists on.
func (c *Cluster) waitServiceAccount(ctx context.Context, namespace string) error {
	return poll(ctx, 250*time.Millisecond, "ServiceAccount "+namespace+"/default", func(ctx context.Context) (bool, error) {
		_, err := c.clientset.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// installCRDs creates (or updates) every CRD found in dir's YAML and JSON
// files and waits until all are Established.
func (c *Cluster) installCRDs(ctx context.Context, dir string) error {
	crds, err := readCRDs(dir)
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("creating apiextensions client: %w", err)
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		_, err := api.Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var existing *apiextensionsv1.CustomResourceDefinition
			if existing, err = api.Get(ctx, crd.Name, metav1.GetOptions{}); err == nil {
				crd.ResourceVersion = existing.ResourceVersion
				_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := poll(ctx, 200*time.Millisecond, "CRD "+crd.Name+" to be Established", func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	c.logf("kwokcluster: %d CRD(s) from %s Established", len(crds), dir)
	return nil
}

func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading CRD dir: %w", err)
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(files)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, path := range files {
		if crds, err = appendCRDs(crds, path); err != nil {
			return nil, err
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	return crds, nil
}

func appendCRDs(crds []*apiextensionsv1.CustomResourceDefinition, path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading CRDs: %w", err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := dec.Decode(crd)
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			// Empty documents and other kinds (a kustomization) are not ours.
			continue
		}
		crds = append(crds, crd)
	}
}
