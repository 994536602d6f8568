// Package shippedrbac gives tests the manager's shipped identity: it
// installs config/rbac (rendered with kustomize, as `kubectl apply -k
// config/default` installs it) on a test API server, mints a token for the
// manager's ServiceAccount with the TokenRequest API, and returns a client
// configuration that authenticates with that token alone. A manager started
// with it can do what the ClusterRole grants and nothing more, so a missing
// rule fails the tests with a 403 instead of passing as an administrator.
package shippedrbac

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The manager's identity and the scrapers' role, as config/rbac names them.
const (
	Namespace         = "stepwise-system"
	ServiceAccount    = "stepwise-manager"
	MetricsReaderRole = "stepwise-metrics-reader"
)

// tokenTTL outlives any test run; the API server may shorten it.
const tokenTTL = 6 * time.Hour

// Install renders config/rbac and creates its objects, and the namespace
// they live in, with admin. Objects that exist are left as they are, so a
// second call on the same API server is harmless.
func Install(ctx context.Context, admin *rest.Config) error {
	root, err := envtestenv.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "config", "rbac")
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	for _, r := range resMap.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return err
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s from config/rbac: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// Token mints a token for a ServiceAccount.
func Token(ctx context.Context, admin *rest.Config, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenTTL.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// ConfigFor is admin's server, CA and client settings with token as the
// only credential.
func ConfigFor(admin *rest.Config, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	return cfg
}

// ManagerConfig installs config/rbac and returns a configuration that
// authenticates as the manager's ServiceAccount.
func ManagerConfig(ctx context.Context, admin *rest.Config) (*rest.Config, error) {
	if err := Install(ctx, admin); err != nil {
		return nil, err
	}
	token, err := Token(ctx, admin, Namespace, ServiceAccount)
	if err != nil {
		return nil, err
	}
	return ConfigFor(admin, token), nil
}
