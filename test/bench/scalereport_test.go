package bench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/compare"
)

// sampler scrapes the manager's and Prometheus' /metrics, the manager's
// resident memory and the big CloneSets' progress every scaleSampleEvery.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	out    []compare.Sample
}

var scaleSeries = map[string]compare.SeriesMatch{
	"cs_reconciles": {Metric: "controller_runtime_reconcile_total", Labels: []string{`controller="cloneset"`}},
	"ro_reconciles": {Metric: "controller_runtime_reconcile_total", Labels: []string{`controller="rollout"`}},
	"cs_depth":      {Metric: "workqueue_depth", Labels: []string{`name="cloneset"`}},
	"ro_depth":      {Metric: "workqueue_depth", Labels: []string{`name="rollout"`}},
	"cs_time_sum":   {Metric: "controller_runtime_reconcile_time_seconds_sum", Labels: []string{`controller="cloneset"`}},
	"cs_time_count": {Metric: "controller_runtime_reconcile_time_seconds_count", Labels: []string{`controller="cloneset"`}},
	// Reads around the cache: the audit policy logs no reads.
	"gets":      {Metric: "rest_client_requests_total", Labels: []string{`method="GET"`}},
	"handovers": {Metric: "stepwise_cloneset_rounds_handed_over_total"},
}

var promSeries = map[string]compare.SeriesMatch{
	"queries": {Metric: "prometheus_http_requests_total", Labels: []string{`handler="/api/v1/query"`}},
}

func startSampler(ctx context.Context, c client.Client, proc *controllerProcess, promURL string) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	managerSeries := maps.Clone(scaleSeries)
	maps.Copy(managerSeries, compare.GoMemorySeries)
	scrape := func(url string, wanted map[string]compare.SeriesMatch, into map[string]float64) {
		resp, err := http.Get(url)
		if err != nil {
			return
		}
		defer func() { _ = resp.Body.Close() }()
		got, err := compare.SumSeries(resp.Body, wanted)
		if err != nil {
			return
		}
		for k, v := range got {
			into[k] = v
		}
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(scaleSampleEvery)
		defer tick.Stop()
		for {
			v := map[string]float64{}
			at := time.Now()
			scrape(proc.metricsURL, managerSeries, v)
			scrape(promURL+"/metrics", promSeries, v)
			v["rss_mib"] = float64(proc.rss()) / (1 << 20)
			if anon, err := proc.statusBytes("RssAnon:"); err == nil {
				v["rss_anon_mib"] = float64(anon) / (1 << 20)
			}
			if file, err := proc.statusBytes("RssFile:"); err == nil {
				v["rss_file_mib"] = float64(file) / (1 << 20)
			}
			var big stepwisev1.CloneSetList
			if err := c.List(ctx, &big, client.InNamespace(bigNamespace)); err == nil {
				_, ready := cloneSetsLeft(big.Items)
				v["big_updated_ready"] = float64(ready)
			}
			s.out = append(s.out, compare.Sample{At: at, Values: v})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() []compare.Sample {
	s.cancel()
	<-s.done
	return s.out
}

type scaleReportData struct {
	when                         time.Time
	nBig, perBig, nRoll, perRoll int
	nodes                        int
	created, patched             time.Duration
	bigWall, allWall             time.Duration
	writes                       compare.Writes
	peakRSS                      int64
	cpu                          float64
	loadBefore, loadAfter        string
	samples                      []compare.Sample
	start                        time.Time
	reactions                    scaleReactions
	rolloutsDone                 []time.Duration
}

func (r scaleReportData) write(w *bytes.Buffer) {
	total := r.nBig*r.perBig + r.nRoll*r.perRoll
	ms := func(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
	fmt.Fprintf(w, "Scale run %s: %d CloneSets x %d Pods updated at once (maxUnavailable 100%%), %d Rollouts x %d Pods with analysis (%d measurements, one per %s); %d Pods on %d kwok nodes; load %s before, %s after.\n\n",
		r.when.Format("2006-01-02 15:04 MST"), r.nBig, r.perBig, r.nRoll, r.perRoll, *scaleAnalysis, scaleAnalysisTick, total, r.nodes, r.loadBefore, r.loadAfter)
	if *scaleManagerArgs != "" {
		fmt.Fprintf(w, "- manager flags besides the defaults: %s\n", *scaleManagerArgs)
	}
	if *scaleManagerEnv != "" {
		fmt.Fprintf(w, "- manager environment besides the run's: %s\n", *scaleManagerEnv)
	}
	fmt.Fprintf(w, "- creation of all Pods and Rollouts until ready/Healthy: %s\n", r.created.Round(time.Second))
	fmt.Fprintf(w, "- the %d image patches took %s\n", r.nBig+r.nRoll, r.patched.Round(time.Millisecond))
	if r.bigWall < 0 {
		fmt.Fprintf(w, "- big CloneSets NOT all updated and ready within -scale-timeout (%s)\n", *scaleTimeout)
	} else {
		fmt.Fprintf(w, "- wall time, big CloneSets all updated and ready: %s\n", r.bigWall.Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "- wall time, everything (every Rollout Healthy on v2): %s\n", r.allWall.Round(100*time.Millisecond))
	if n := len(r.rolloutsDone); n > 0 {
		fmt.Fprintf(w, "- Rollouts Healthy after: first %s, median %s, last %s\n", r.rolloutsDone[0].Round(100*time.Millisecond),
			compare.Percentile(r.rolloutsDone, 50).Round(100*time.Millisecond), r.rolloutsDone[n-1].Round(100*time.Millisecond))
	}
	all, conflicts := r.writes.Total()
	pods := 0
	for k, n := range r.writes {
		if k.Resource == "pods" || k.Resource == "pods/status" {
			pods += n
		}
	}
	fmt.Fprintf(w, "- manager writes (audit log): %d, %.2f per Pod (Pod writes %.2f per Pod; 409s %d)\n", all, float64(all)/float64(total), float64(pods)/float64(total), conflicts)
	for _, k := range r.writes.Sorted() {
		fmt.Fprintf(w, "    %-40s %d\n", k.String(), r.writes[k])
	}
	if n := len(r.samples); n > 0 {
		if _, scraped := r.samples[n-1].Values["gets"]; scraped {
			gets := compare.Increase(compare.Rates(r.samples, "gets"))
			fmt.Fprintf(w, "- manager reads from the API server (its rest_client_requests_total, GET: single objects and lists): %.0f, %.2f per Pod\n", gets, gets/float64(total))
		} else {
			// Not 0: a series that was never scraped is not a manager that read nothing.
			fmt.Fprintf(w, "- manager reads from the API server: not scraped (no rest_client_requests_total{method=\"GET\"} on its /metrics)\n")
		}
	}
	fmt.Fprintf(w, "- manager peak RSS: %.0f MiB; CPU %.1f s over the update\n", float64(r.peakRSS)/(1<<20), r.cpu)
	// The split tells the Go runtime's memory (heap, stacks: anonymous)
	// from the pages of the binary mapped in (file), which no cache change
	// moves; sampled, so the peaks are to within one sample.
	var anon, file float64
	for _, s := range r.samples {
		anon = max(anon, s.Values["rss_anon_mib"])
		file = max(file, s.Values["rss_file_mib"])
	}
	fmt.Fprintf(w, "    of which, sampled every %s: anonymous (Go heap, stacks, runtime) peak %.0f MiB, file-backed (the binary's pages) peak %.0f MiB\n", scaleSampleEvery, anon, file)
	// What the anonymous part is made of, from the Go runtime's metrics.
	if m, ok := compare.GoMemoryAtPeak(r.samples, "rss_anon_mib"); ok {
		fmt.Fprintf(w, "    Go runtime at the highest anonymous RSS: heap objects %.0f MiB (live at the last collection %.0f, next collection at %.0f), free heap not yet returned %.0f, unused in spans %.0f, stacks and runtime %.0f; the highest live heap of the run %.0f MiB\n",
			m.HeapObjects/(1<<20), m.HeapLive/(1<<20), m.HeapGoal/(1<<20), m.HeapFree/(1<<20), m.HeapUnused/(1<<20), m.Other/(1<<20), m.PeakLive/(1<<20))
	}
	rc := r.reactions
	if len(rc.gate) > 0 {
		fmt.Fprintf(w, "- step reaction, last canary Pod ready -> next step in the Rollout's status (%d gate-only steps): p50 %s, p99 %s, max %s\n",
			len(rc.gate), ms(compare.Percentile(rc.gate, 50)), ms(compare.Percentile(rc.gate, 99)), ms(compare.Percentile(rc.gate, 100)))
		fmt.Fprintf(w, "    of which Pod ready -> CloneSet status: p50 %s, p99 %s; CloneSet status -> Rollout: p50 %s, p99 %s\n",
			ms(compare.Percentile(rc.cloneSetPart, 50)), ms(compare.Percentile(rc.cloneSetPart, 99)),
			ms(compare.Percentile(rc.rolloutPart, 50)), ms(compare.Percentile(rc.rolloutPart, 99)))
	}
	writeSplits(w, r.start, rc.traces)
	if len(rc.analysis) > 0 {
		fmt.Fprintf(w, "- step reaction, analysis Passed in status -> next step (%d): p50 %s, p99 %s, max %s\n",
			len(rc.analysis), ms(compare.Percentile(rc.analysis, 50)), ms(compare.Percentile(rc.analysis, 99)), ms(compare.Percentile(rc.analysis, 100)))
	}
	if rc.missing > 0 {
		fmt.Fprintf(w, "- step transitions not timed (an event not seen): %d\n", rc.missing)
	}
	q := compare.Rates(r.samples, "queries")
	cs, ro := compare.Rates(r.samples, "cs_reconciles"), compare.Rates(r.samples, "ro_reconciles")
	fmt.Fprintf(w, "- Prometheus queries/s (its prometheus_http_requests_total, /api/v1/query): mean %.1f, max %.1f\n", compare.MeanRate(q), compare.MaxRate(q))
	fmt.Fprintf(w, "- reconciles/s: CloneSet mean %.1f max %.1f; Rollout mean %.1f max %.1f\n", compare.MeanRate(cs), compare.MaxRate(cs), compare.MeanRate(ro), compare.MaxRate(ro))
	if n := len(r.samples); n > 0 {
		if _, scraped := r.samples[n-1].Values["handovers"]; scraped {
			fmt.Fprintf(w, "- CloneSet rounds ended early to hand their worker to a governed CloneSet whose Pod turned ready: %.0f\n",
				compare.Increase(compare.Rates(r.samples, "handovers")))
		} else {
			// The counter has no series until the first hand-over.
			fmt.Fprintf(w, "- CloneSet rounds ended early for a governed CloneSet: none on /metrics (none happened, or a manager without stepwise_cloneset_rounds_handed_over_total)\n")
		}
	}
	maxDepth := map[string]float64{}
	for _, s := range r.samples {
		for _, k := range []string{"cs_depth", "ro_depth", "rss_mib"} {
			maxDepth[k] = max(maxDepth[k], s.Values[k])
		}
	}
	fmt.Fprintf(w, "- workqueue depth max: CloneSet %.0f, Rollout %.0f\n\n", maxDepth["cs_depth"], maxDepth["ro_depth"])

	// Over time, one row per 10 s.
	fmt.Fprintf(w, "| t | CloneSet reconciles/s | CloneSet reconcile mean ms | Rollout reconciles/s | CloneSet queue | Rollout queue | Prometheus queries/s | manager RSS MiB | big Pods updated+ready |\n|---|---|---|---|---|---|---|---|---|\n")
	const row = 10 * time.Second
	for i := 0; i < len(r.samples); {
		j := i + 1
		for j < len(r.samples)-1 && r.samples[j].At.Sub(r.samples[i].At) < row {
			j++
		}
		if j >= len(r.samples) {
			break
		}
		a, z := r.samples[i], r.samples[j]
		window := r.samples[i : j+1]
		depthCS, depthRO := 0.0, 0.0
		for _, s := range window {
			depthCS, depthRO = max(depthCS, s.Values["cs_depth"]), max(depthRO, s.Values["ro_depth"])
		}
		dt := z.At.Sub(a.At).Seconds()
		meanMS := 0.0
		if n := z.Values["cs_time_count"] - a.Values["cs_time_count"]; n > 0 {
			meanMS = 1000 * (z.Values["cs_time_sum"] - a.Values["cs_time_sum"]) / n
		}
		fmt.Fprintf(w, "| %s | %.1f | %.0f | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f |\n", z.At.Sub(r.start).Round(time.Second),
			nonNeg(z.Values["cs_reconciles"]-a.Values["cs_reconciles"])/dt, meanMS, nonNeg(z.Values["ro_reconciles"]-a.Values["ro_reconciles"])/dt,
			depthCS, depthRO, nonNeg(z.Values["queries"]-a.Values["queries"])/dt, z.Values["rss_mib"], z.Values["big_updated_ready"])
		i = j
	}
	fmt.Fprintln(w, "\n(queue: the highest workqueue_depth sampled in the row; samples every", scaleSampleEvery.String()+")")
}

func nonNeg(v float64) float64 { return max(v, 0) }

// writeSplits prints the gate reactions split at the manager's status
// writes, as percentiles of each part and as the slowest reactions whole:
// the parts' p99s come from different steps, and it is the slowest steps
// whose parts tell where the tail is.
func writeSplits(w *bytes.Buffer, start time.Time, traces []gateTrace) {
	type split struct {
		trace gateTrace
		// parts: [CloneSet, Rollout] x [manager, API server, watch].
		parts [2][3]time.Duration
		total time.Duration
	}
	var splits []split
	for _, t := range traces {
		if !t.foundCloneSet || !t.foundRollout {
			continue
		}
		s := split{trace: t, total: t.nextAt.Sub(t.podAt)}
		s.parts[0][0], s.parts[0][1], s.parts[0][2] = t.cloneSetWrite.Split(t.podAt, t.statusAt)
		s.parts[1][0], s.parts[1][1], s.parts[1][2] = t.rolloutWrite.Split(t.statusAt, t.nextAt)
		splits = append(splits, s)
	}
	if len(splits) == 0 {
		return
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }
	part := func(side, i int) []time.Duration {
		out := make([]time.Duration, 0, len(splits))
		for _, s := range splits {
			out = append(out, s.parts[side][i])
		}
		return out
	}
	fmt.Fprintf(w, "    split at the manager's status writes in the audit log (%d of %d steps found), p50 / p99 ms:\n", len(splits), len(traces))
	for side, name := range []string{"CloneSet (from the Pod ready)", "Rollout (from the CloneSet status)"} {
		fmt.Fprintf(w, "      %s: manager until its status patch reached the API server %s / %s; API server %s / %s; until the benchmark's watch saw it %s / %s\n", name,
			ms(compare.Percentile(part(side, 0), 50)), ms(compare.Percentile(part(side, 0), 99)),
			ms(compare.Percentile(part(side, 1), 50)), ms(compare.Percentile(part(side, 1), 99)),
			ms(compare.Percentile(part(side, 2), 50)), ms(compare.Percentile(part(side, 2), 99)))
	}
	sort.Slice(splits, func(i, j int) bool { return splits[i].total > splits[j].total })
	fmt.Fprintf(w, "    the slowest, ms (t after the change, Rollout, step: whole = CloneSet: manager + API server + watch | Rollout: manager + API server + watch):\n")
	for _, s := range splits[:min(8, len(splits))] {
		fmt.Fprintf(w, "      t+%s %s step %d: %s = %s + %s + %s | %s + %s + %s\n", s.trace.podAt.Sub(start).Round(100*time.Millisecond), s.trace.name, s.trace.step,
			ms(s.total), ms(s.parts[0][0]), ms(s.parts[0][1]), ms(s.parts[0][2]), ms(s.parts[1][0]), ms(s.parts[1][1]), ms(s.parts[1][2]))
	}
}
