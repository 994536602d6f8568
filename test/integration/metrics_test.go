package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
)

// TestMetricsEndpointAuthenticatesAndAuthorizes runs the shipped manager,
// as its ServiceAccount, with the default (secure) metrics endpoint: HTTPS,
// only for bearer tokens the API server accepts and authorizes for GET
// /metrics, HTTP/1.1 only.
func TestMetricsEndpointAuthenticatesAndAuthorizes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mgrCfg, err := shippedrbac.ManagerConfig(ctx, env.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	addr := freeAddr(t)
	m, err := harness.StartManager(ctx, mgrCfg, manager.Options{
		Metrics: manager.MetricsOptions{BindAddress: addr},
		// Quiet: the suite's manager does the reconciling.
		Controllers: []string{manager.RolloutController},
		Namespaces:  []string{ns},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(m.Stop)

	// A scraper bound to the shipped reader role, and a stranger.
	for _, name := range []string{"scraper", "stranger"} {
		g.Expect(env.client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scrape-stepwise-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: shippedrbac.MetricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}
	g.Expect(env.client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), binding) })
	scraper, err := shippedrbac.Token(ctx, env.cfg, ns, "scraper")
	g.Expect(err).NotTo(HaveOccurred())
	stranger, err := shippedrbac.Token(ctx, env.cfg, ns, "stranger")
	g.Expect(err).NotTo(HaveOccurred())

	// The certificate is self-signed: only encryption is tested here.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test certificate
		ForceAttemptHTTP2: true,
	}}
	scrape := func(g Gomega, scheme, token string) (int, string, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, resp.Proto, string(body)
	}

	g.Eventually(func(g Gomega) {
		code, proto, body := scrape(g, "https", scraper)
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(proto).To(Equal("HTTP/1.1"), "HTTP/2 must not be offered")
		g.Expect(body).To(ContainSubstring(`controller_runtime_max_concurrent_reconciles{controller="rollout"}`))
	}, timeout).Should(Succeed())
	code, _, _ := scrape(g, "https", "")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "no token")
	// controller-runtime's filter answers 500 when the TokenReview fails.
	code, _, _ = scrape(g, "https", "not-a-token")
	g.Expect(code).NotTo(Equal(http.StatusOK), "a token the API server does not know")
	code, _, _ = scrape(g, "https", stranger)
	g.Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount without the reader role")
	code, _, body := scrape(g, "http", "")
	g.Expect(code).To(Equal(http.StatusBadRequest), "plain HTTP is not served: %s", strings.TrimSpace(body))
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
