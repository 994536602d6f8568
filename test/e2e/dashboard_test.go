package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// dashboardTimeout bounds one wait for the page: a whole release with
// three analysed steps takes about a minute on two shared cores.
const dashboardTimeout = 3 * time.Minute

// TestDashboard runs `kubectl stepwise dashboard` as a user who may read
// and steer Rollouts in one namespace only, and drives it with headless
// chromium: a release that promotes step by step (the page follows each
// step and its chart gains points), one that the analysis aborts (the
// failed point is marked), one paused for a promote that the page's abort
// button aborts, and a Rollout in another namespace that never shows.
// STEPWISE_UPDATE_SCREENSHOT=1 saves docs/images/dashboard.png mid-release.
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster, Prometheus and chromium")
	}
	browserPath := chromium(t)
	e := newRolloutEnv(t)
	bin := buildPlugin(t)
	g := NewWithT(t)

	ns := e.namespace(t, "dash")
	hidden := e.namespace(t, "dash-hidden")
	viewer := namespaceViewer(t, e, ns)
	viewerDyn, err := dynamic.NewForConfig(viewer)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = viewerDyn.Resource(cli.RolloutResource()).Namespace(hidden).List(t.Context(), metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the viewer may not read %s: %v", hidden, err)

	analysis := errorRateAnalysis(e.prom.URL())
	e.dashRelease(t, ns, "good", 3, true, stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("60%", stepPause), step("20%", noPause), step("0", noPause)},
		Analysis: analysis,
	})
	e.dashRelease(t, ns, "bad", 3, true, stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("60%", noPause), step("0", noPause)},
		Analysis: analysis,
	})
	e.dashRelease(t, ns, "held", 2, false, stepwisev1.RolloutSpec{
		Steps: []stepwisev1.RolloutStep{step("50%", 0), step("0", noPause)},
	})
	e.dashRelease(t, hidden, "secret", 1, false, stepwisev1.RolloutSpec{Steps: []stepwisev1.RolloutStep{step("0", noPause)}})
	e.waitRatesOf(t, ns, 6) // good and bad serve traffic; held does not

	kubeconfig := writeKubeconfig(t, viewer, ns)
	url := startDashboard(t, bin, "--kubeconfig", kubeconfig)
	p := &page{t: t, ctx: newBrowser(t, browserPath)}
	p.do(chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(url))
	loc, err := chromedp.Run(p.ctx, chromedp.Location())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loc).NotTo(ContainSubstring("token="), "the token leaves the address bar for a cookie")

	t.Run("ListShowsTheNamespaceOnly", func(t *testing.T) {
		p.t = t
		p.wait("three Rollouts", `document.querySelectorAll("tr[data-rollout]").length === 3`, dashboardTimeout)
		for _, name := range []string{"good", "bad", "held"} {
			row := fmt.Sprintf(`document.querySelector('tr[data-rollout="%s/%s"]')`, ns, name)
			p.wait(name+" Healthy", row+`.querySelector("[data-phase]").dataset.phase === "Healthy"`, dashboardTimeout)
		}
		p.wait("Pods of good", `document.querySelector('tr[data-rollout="`+ns+`/good"]').innerText.includes("3/3 updated, 3/3 ready")`, dashboardTimeout)
		g := NewWithT(t)
		g.Expect(p.eval(`document.getElementById("scope").textContent`)).To(Equal("namespace " + ns))
		g.Expect(p.eval(`String(document.querySelectorAll('tr[data-rollout^="` + hidden + `/"]').length)`)).To(Equal("0"))
		g.Expect(p.text()).NotTo(ContainSubstring("secret"))

		p.open("#/rollouts/" + hidden + "/secret")
		p.wait("a refusal for the other namespace", `document.getElementById("rollout-error")`, time.Minute)
		g.Expect(p.text()).To(ContainSubstring("this dashboard watches namespace " + ns + " only"))
		g.Expect(p.text()).NotTo(ContainSubstring("Healthy"))
	})

	t.Run("AllNamespacesNeedsClusterRights", func(t *testing.T) {
		other := &page{t: t, ctx: newBrowser(t, browserPath)}
		other.do(chromedp.Navigate(startDashboard(t, bin, "--kubeconfig", kubeconfig, "--all-namespaces")))
		other.wait("the refusal", `document.getElementById("list-error")`, time.Minute)
		g := NewWithT(t)
		g.Expect(other.text()).To(SatisfyAll(ContainSubstring("cannot watch Rollouts"), ContainSubstring("forbidden")))
		g.Expect(other.eval(`String(document.querySelectorAll("tr[data-rollout]").length)`)).To(Equal("0"))
		g.Expect(other.text()).NotTo(ContainSubstring("secret"))
	})

	// The three releases start together; the page follows them one by one.
	p.t = t
	p.open("#/rollouts/" + ns + "/good")
	p.wait("good's page", `document.querySelector('ol.steps li[data-step="1"]')`, time.Minute)
	p.eval(`window.__seen = [];
new MutationObserver(() => {
  const cur = document.querySelector('ol.steps li[data-state="current"]');
  const phase = document.querySelector("h1 [data-phase]");
  const chart = document.querySelector("svg.chart");
  const key = (cur ? "step " + cur.dataset.step : (phase ? phase.dataset.phase : "?")) + " points " + (chart ? chart.dataset.points : "0");
  if (window.__seen[window.__seen.length - 1] !== key) window.__seen.push(key);
}).observe(document.getElementById("main"), {childList: true, subtree: true}); ""`)
	e.setImage(t, ns, "good", "1.1.0")
	e.setImage(t, ns, "bad", "1.1.0-bad")
	e.setImage(t, ns, "held", "1.1.0")

	t.Run("FollowsEveryStepAndChartsItsMeasurements", func(t *testing.T) {
		p.t = t
		shot := os.Getenv("STEPWISE_UPDATE_SCREENSHOT") == "1"
		deadline := time.Now().Add(dashboardTimeout)
		// One expression, so that the page cannot change between two reads.
		done := `(() => { const s = window.__seen; const i = s.findIndex(k => k.startsWith("step 3"));
  return String(i >= 0 && s.slice(i).some(k => k.startsWith("Healthy"))); })()`
		for p.eval(done) != "true" {
			if time.Now().After(deadline) {
				t.Fatalf("good never became Healthy after its steps; seen %s\npage:\n%s", p.eval(`JSON.stringify(window.__seen)`), p.text())
			}
			if shot && p.eval(`String(Boolean(document.querySelector('li[data-step="3"][data-state="current"]')) && Number(document.querySelector("svg.chart") ? document.querySelector("svg.chart").dataset.points : 0) >= 4)`) == "true" {
				saveScreenshot(t, p)
				shot = false
			}
			time.Sleep(200 * time.Millisecond)
		}
		var seen []string
		g := NewWithT(t)
		g.Expect(jsonInto(p.eval(`JSON.stringify(window.__seen)`), &seen)).To(Succeed())
		t.Logf("seen: %q", seen)
		var steps []string
		lastPoints := -1
		maxPoints := 0
		for _, k := range seen {
			what, points, _ := strings.Cut(k, " points ")
			n, err := strconv.Atoi(points)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n).To(BeNumerically(">=", lastPoints), "the chart never loses points: %q", seen)
			lastPoints, maxPoints = n, max(maxPoints, n)
			if len(steps) == 0 || steps[len(steps)-1] != what {
				steps = append(steps, what)
			}
		}
		// The page was Healthy on the old revision before the commit.
		g.Expect(steps).To(ContainElement("step 1"))
		steps = steps[indexOrEnd(steps, "step 1"):]
		g.Expect(steps).To(Equal([]string{"step 1", "step 2", "step 3", "Healthy"}), "each step shown in turn, none skipped: %q", seen)
		g.Expect(maxPoints).To(Equal(6), "two measurements per step, each a point")
		g.Expect(distinctPoints(seen)).To(BeNumerically(">=", 3), "points arrived one render after another, not all at once: %q", seen)
		g.Expect(p.eval(`document.querySelector("svg.chart").dataset.failed`)).To(Equal("0"))
		g.Expect(p.text()).To(SatisfyAll(ContainSubstring("RolloutCompleted"), ContainSubstring("AnalysisPassed")))
	})

	t.Run("AnalysisAbortMarksTheFailedPoint", func(t *testing.T) {
		p.t = t
		p.open("#/rollouts/" + ns + "/bad")
		p.wait("bad Aborted", `document.querySelector('h1 [data-phase="Aborted"]')`, dashboardTimeout)
		p.wait("a failed point", `document.querySelector('svg.chart[data-metric="error-rate"]') && Number(document.querySelector("svg.chart").dataset.failed) >= 1`, time.Minute)
		p.wait("step 1 failed", `document.querySelector('li[data-step="1"][data-state="failed"]')`, time.Minute)
		p.wait("a red point", `document.querySelector('svg.chart circle.pt-Failed')`, time.Minute)
		g := NewWithT(t)
		g.Expect(p.text()).To(ContainSubstring("AnalysisFailed"))
		g.Expect(p.eval(`String(document.querySelector('button[data-action="retry"]').disabled)`)).To(Equal("false"), "an aborted rollout can be retried")
		g.Expect(p.eval(`document.querySelector('[data-why="abort"]').textContent`)).To(Equal("already aborted"))
	})

	t.Run("AbortButtonAbortsAPausedRollout", func(t *testing.T) {
		p.t = t
		p.open("#/rollouts/" + ns + "/held")
		p.wait("held awaiting a promote", `document.querySelector('h1 [data-phase="Paused"]') && document.querySelector('button[data-action="promote"]') && !document.querySelector('button[data-action="promote"]').disabled`, dashboardTimeout)
		g := NewWithT(t)
		g.Expect(p.eval(`document.querySelector('[data-why="retry"]').textContent`)).To(Equal("only an aborted rollout or an inconclusive analysis can be retried"))
		g.Expect(p.eval(`document.querySelector('[data-why="resume"]').textContent`)).To(Equal("not paused by a request"))
		g.Expect(p.eval(`String(document.querySelector('li[data-step="1"]').dataset.state)`)).To(Equal("current"))
		g.Expect(p.eval(`String(document.querySelectorAll('#pods tr[data-role="canary"]').length)`)).To(Equal("1"))

		p.do(chromedp.Click(chromedp.CSS(`button[data-action="abort"]`)))
		p.wait("the confirmation", `document.getElementById("confirm").open`, 10*time.Second)
		g.Expect(p.eval(`document.getElementById("confirm-annotation").textContent`)).To(ContainSubstring(stepwisev1.AbortAtAnnotation))
		// Nothing is sent before the confirmation.
		ro := &stepwisev1.Rollout{}
		g.Expect(e.client.Get(t.Context(), objectKey(ns, "held"), ro)).To(Succeed())
		g.Expect(ro.Annotations).NotTo(HaveKey(stepwisev1.AbortAtAnnotation))

		p.do(chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		p.wait("the answer", `document.getElementById("result")`, 30*time.Second)
		g.Expect(p.eval(`document.getElementById("result").textContent`)).To(HavePrefix("rollout " + ns + "/held: abort requested (" + stepwisev1.AbortAtAnnotation + "="))
		p.wait("held Aborted", `document.querySelector('h1 [data-phase="Aborted"]')`, time.Minute)

		g.Eventually(func(g Gomega) {
			ro := &stepwisev1.Rollout{}
			g.Expect(e.client.Get(context.Background(), objectKey(ns, "held"), ro)).To(Succeed())
			g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
			g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAbortRequested))
			g.Expect(ro.Status.LastHandledAbortAt).To(Equal(ro.Annotations[stepwisev1.AbortAtAnnotation]))
			managers := []string{}
			for _, f := range ro.ManagedFields {
				managers = append(managers, f.Manager)
			}
			g.Expect(managers).To(ContainElement(cli.FieldManager), "written by the CLI's code")
		}, rolloutTimeout, rolloutPoll).Should(Succeed())
		p.wait("the abort button disabled", `document.querySelector('button[data-action="abort"]').disabled`, 30*time.Second)
	})

	t.Run("RetryThenPromoteFromThePage", func(t *testing.T) {
		p.t = t
		p.send("retry")
		p.wait("held at step 1 again, awaiting a promote", `document.querySelector('h1 [data-phase="Paused"]') && document.querySelector('li[data-step="1"][data-state="current"]') && !document.querySelector('button[data-action="promote"]').disabled`, dashboardTimeout)
		p.send("promote")
		p.wait("held Healthy", `document.querySelector('h1 [data-phase="Healthy"]')`, dashboardTimeout)
		// The controller records RolloutCompleted after the status write
		// that makes the page say Healthy: the Event follows by a watch.
		NewWithT(t).Eventually(p.text, 30*time.Second, 500*time.Millisecond).Should(
			SatisfyAll(ContainSubstring("Retried"), ContainSubstring("Promoted"), ContainSubstring("RolloutCompleted")))
	})
}

// send clicks a request's button, confirms, and waits for the answer.
func (p *page) send(action string) {
	p.t.Helper()
	p.wait(action+" enabled", `!document.querySelector('button[data-action="`+action+`"]').disabled`, time.Minute)
	p.do(chromedp.Click(chromedp.CSS(`button[data-action="` + action + `"]`)))
	p.wait("the confirmation", `document.getElementById("confirm").open`, 10*time.Second)
	p.do(chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	p.wait(action+" sent", `document.getElementById("result") && document.getElementById("result").textContent.includes(": `+action+` requested (")`, 30*time.Second)
}

func saveScreenshot(t *testing.T, p *page) {
	t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	path := repoPath(t, "docs", "images", "dashboard.png")
	if err := os.MkdirAll(strings.TrimSuffix(path, "/dashboard.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

func distinctPoints(seen []string) int {
	set := map[string]bool{}
	for _, k := range seen {
		_, points, _ := strings.Cut(k, " points ")
		set[points] = true
	}
	return len(set)
}
