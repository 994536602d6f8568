package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
)

// chromium finds Debian's chromium (or $STEPWISE_CHROMIUM). A missing
// browser fails the test, as a missing kwok binary does: a skipped test
// reads as a passed one in CI.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STEPWISE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-headless-shell", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium found: install it (apt-get install -y chromium, as .ci/run does) or set STEPWISE_CHROMIUM")
	return ""
}

// newBrowser starts headless chromium that reaches 127.0.0.1 and nothing
// else: every other address goes to a proxy that does not exist, and no
// name is resolved, so the page proves it needs no network.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(1280, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser now, so that a broken install fails here.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium %s: %v", path, err)
	}
	// An exception in the page's script fails the test (the page would
	// otherwise only look stuck), and so does a request to anything but
	// 127.0.0.1: the page must need no network (no CDN, no font).
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		var problem string
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			if e.ExceptionDetails != nil {
				problem = "the page threw: " + e.ExceptionDetails.Text
				if e.ExceptionDetails.Exception != nil {
					problem += " " + e.ExceptionDetails.Exception.Description
				}
			}
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; !strings.HasPrefix(u, "http://127.0.0.1:") && !strings.HasPrefix(u, "about:") && !strings.HasPrefix(u, "data:") {
				problem = "the page asked for " + u
			}
		}
		if problem != "" {
			mu.Lock()
			problems = append(problems, problem)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Error(p)
		}
	})
	return ctx
}

// buildPlugin builds kubectl-stepwise as users get it.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-stepwise")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-stepwise")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-stepwise: %v\n%s", err, out)
	}
	return bin
}

// writeKubeconfig writes a kubeconfig whose only credential is cfg's token.
func writeKubeconfig(t *testing.T, cfg *rest.Config, namespace string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kwok"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData,
		CertificateAuthority: cfg.CAFile, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["viewer"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["viewer"] = &clientcmdapi.Context{Cluster: "kwok", AuthInfo: "viewer", Namespace: namespace}
	kc.CurrentContext = "viewer"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// namespaceViewer creates a ServiceAccount in ns that may read Rollouts,
// workloads, Pods and Events there and send requests (patch Rollouts), and
// nothing anywhere else; it returns a configuration with its token.
func namespaceViewer(t *testing.T, e *rolloutEnv, ns string) *rest.Config {
	t.Helper()
	ctx := t.Context()
	g := NewWithT(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rollout-operator"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{stepwisev1.GroupVersion.Group}, Resources: []string{"rollouts"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{stepwisev1.GroupVersion.Group}, Resources: []string{"clonesets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	for _, o := range []client.Object{sa, role, binding} {
		g.Expect(e.client.Create(ctx, o)).To(Succeed())
	}
	token, err := shippedrbac.Token(ctx, e.cluster.RESTConfig, ns, sa.Name)
	g.Expect(err).NotTo(HaveOccurred())
	return shippedrbac.ConfigFor(e.cluster.RESTConfig, token)
}

var dashboardURL = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/\?token=[A-Za-z0-9_-]+`)

// startDashboard runs `kubectl stepwise dashboard` and returns the URL it
// prints. It is stopped with SIGTERM, as Ctrl-C would.
func startDashboard(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"dashboard"}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kubectl stepwise dashboard: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Logf("dashboard: %s", sc.Text())
			if u := dashboardURL.FindString(sc.Text()); u != "" {
				found <- u
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(time.Minute):
		t.Fatal("kubectl stepwise dashboard printed no URL within a minute")
	}
	return ""
}

// page drives one tab of the dashboard.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v\npage: %s", err, p.text())
	}
}

func (p *page) eval(expr string) string {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		return "error: " + err.Error()
	}
	return v
}

// text is what the page shows, for failure messages.
func (p *page) text() string {
	return p.eval(`document.body ? document.body.innerText : ""`)
}

// open shows a route of the single-page app (#/ or #/rollouts/NS/NAME).
func (p *page) open(route string) {
	p.t.Helper()
	p.eval(fmt.Sprintf(`location.hash = %q; ""`, route))
}

// wait polls a JS condition in the page until it returns "true"; the page
// itself only listens to its event stream.
func (p *page) wait(what, expr string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = p.eval(`String(Boolean(` + expr + `))`); last == "true" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.t.Fatalf("the page never showed %s (last: %s)\npage:\n%s", what, last, p.text())
}

// repoPath is a path in the repository.
func repoPath(t *testing.T, parts ...string) string {
	t.Helper()
	root, err := envtestenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// dashRelease creates a CloneSet on 1.0.0 and a Rollout of the same name
// driving it, and waits until the Rollout adopted the running revision.
// Pods without traffic get no series in Prometheus.
func (e *rolloutEnv) dashRelease(t *testing.T, ns, name string, replicas int32, traffic bool, spec stepwisev1.RolloutSpec) {
	t.Helper()
	g := NewWithT(t)
	cs := cloneSet(ns, name, replicas, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Spec.Containers[0].Image = webImage("1.0.0")
	cs.Spec.Template.Annotations = map[string]string{kwokcluster.AnnotationRestartDelay: "0"}
	if !traffic {
		cs.Spec.Template.Labels[noTrafficLabel] = "off"
	}
	g.Expect(e.client.Create(t.Context(), cs)).To(Succeed())
	e.waitSettled(t, ns, name, replicas, replicas, settleTimeout)
	spec.WorkloadRef = stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: name}
	g.Expect(e.client.Create(t.Context(), &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})).To(Succeed())
	g.Eventually(func(g Gomega) {
		ro := &stepwisev1.Rollout{}
		g.Expect(e.client.Get(context.Background(), objectKey(ns, name), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).NotTo(BeEmpty())
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
}

// waitRatesOf waits until Prometheus has both codes' rates for pods Pods of
// the namespace, as story.waitRates does for a story.
func (e *rolloutEnv) waitRatesOf(t *testing.T, ns string, pods int) {
	t.Helper()
	q := fmt.Sprintf(`count(rate(http_requests_total{namespace=%q}[10s]))`, ns)
	NewWithT(t).Eventually(func(g Gomega) {
		v, _, _, err := e.promAPI.Query(context.Background(), q, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		vec, ok := v.(model.Vector)
		g.Expect(ok).To(BeTrue(), "vector result, got %s", v.Type())
		g.Expect(vec).To(HaveLen(1), "the namespace has rates")
		g.Expect(float64(vec[0].Value)).To(BeEquivalentTo(2*pods), "a 200 and a 500 rate per Pod")
	}, rolloutTimeout, 250*time.Millisecond).Should(Succeed())
}

// setImage changes the app image, as a commit applied by GitOps would.
func (e *rolloutEnv) setImage(t *testing.T, ns, name, version string) {
	t.Helper()
	e.mutate(t, ns, name, func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = webImage(version) })
}

func objectKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func jsonInto(data string, into any) error { return json.Unmarshal([]byte(data), into) }
