package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// followed is what the demo saw of one release.
type followed struct {
	label string
	image string
	// last is the Rollout when it settled (Healthy or Aborted).
	last *stepwisev1.Rollout
	// verdict is cli.Judge's of the last snapshot.
	verdict cli.Verdict
	// stepsSeen are the step indexes the Rollout was seen at.
	stepsSeen map[int]bool
	// lastStep is the last step index seen, -1 for none.
	lastStep int
	// measurements are the ones taken during this release.
	measurements []stepwisev1.Measurement
	took         time.Duration
}

// follow watches the Rollout, with the kubectl plugin's own view, until
// cli.Judge says it is Healthy or Aborted for the workload's current
// revision. live draws the view; otherwise it is silent. onChange, if set,
// sees every snapshot after it is drawn.
func (d *demo) follow(ctx context.Context, label string, live bool, timeout time.Duration, onChange func(cli.Snapshot) error) (*followed, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	f := &followed{label: label, stepsSeen: map[int]bool{}, lastStep: -1}
	var earlier []stepwisev1.Measurement
	first := true
	v := &liveView{out: d.p.out, terminal: d.opts.Terminal, color: d.opts.Color, label: label, began: began, p: d.p}
	if live && v.terminal {
		// Countdowns and ages move without any change in the cluster.
		go v.tick(ctx)
	}
	err := cli.Follow(ctx, d.dyn, d.opts.Namespace, d.rollout.Name, func(s cli.Snapshot) (bool, error) {
		verdict := cli.Judge(s)
		if s.Rollout == nil {
			return true, fmt.Errorf("rollout %s was deleted", d.rollout.Name)
		}
		if first {
			// Measurements accumulate across releases; this release's
			// are the ones after what was there when it began.
			earlier = s.Rollout.Status.Measurements
			first = false
		}
		if i := s.Rollout.Status.CurrentStepIndex; i != nil {
			f.stepsSeen[int(*i)] = true
			f.lastStep = int(*i)
		}
		f.last, f.verdict = s.Rollout, verdict
		if live {
			if err := v.show(s, verdict); err != nil {
				return true, err
			}
		}
		if onChange != nil {
			if err := onChange(s); err != nil {
				return true, err
			}
		}
		return verdict.Outcome != cli.Waiting, nil
	})
	cancel()
	v.stop()
	f.took = time.Since(began)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && f.last != nil {
			return nil, fmt.Errorf("%s: rollout not Healthy or Aborted within %s; last seen: %s: %w", label, timeout, f.verdict.Summary, err)
		}
		return nil, fmt.Errorf("%s: following rollout %s: %w", label, d.rollout.Name, err)
	}
	f.measurements = since(earlier, f.last.Status.Measurements)
	if live {
		if err := v.final(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// since returns the measurements of now taken after those of before. The
// list is append-only but drops its oldest entries past
// MaxMeasurements, so "after" means after before's last entry.
func since(before, now []stepwisev1.Measurement) []stepwisev1.Measurement {
	if len(before) == 0 {
		return now
	}
	last := before[len(before)-1]
	for i := len(now) - 1; i >= 0; i-- {
		if now[i].Time.Equal(&last.Time) && now[i].Metric == last.Metric && now[i].Step == last.Step && now[i].Value == last.Value && now[i].Phase == last.Phase {
			return now[i+1:]
		}
	}
	return now
}

// liveView draws internal/cli's view of the Rollout. On a terminal it redraws
// in place (and every second, for countdowns); elsewhere (CI, a test, a
// pipe) it prints a line when cli.Judge's summary changes and the full view
// once, at the end.
type liveView struct {
	out      io.Writer
	terminal bool
	color    bool
	label    string
	began    time.Time
	p        *progress

	mu          sync.Mutex
	last        *cli.Snapshot
	verdict     cli.Verdict
	lastSummary string
	drawnLines  int
	stopped     bool
}

func (v *liveView) show(s cli.Snapshot, verdict cli.Verdict) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last, v.verdict = &s, verdict
	if v.terminal {
		return v.redrawLocked()
	}
	if verdict.Summary != v.lastSummary {
		v.lastSummary = verdict.Summary
		v.p.detail("%s: %s", v.label, verdict.Summary)
	}
	return nil
}

func (v *liveView) tick(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			v.mu.Lock()
			if !v.stopped && v.last != nil {
				_ = v.redrawLocked()
			}
			v.mu.Unlock()
		}
	}
}

// stop ends the redraws; the last frame stays on screen.
func (v *liveView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopped = true
}

// final prints the settled view where no live redraw showed it.
func (v *liveView) final() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.terminal || v.last == nil {
		return nil
	}
	return v.write(indent(v.render()))
}

func (v *liveView) render() string {
	return cli.RenderRollout(v.last.View(), cli.ViewOptions{Now: time.Now(), Color: v.color})
}

// redrawLocked moves the cursor up over the previous frame and draws the
// new one in one write, so the screen does not flicker and what was printed
// before the view stays in the scrollback.
func (v *liveView) redrawLocked() error {
	header := fmt.Sprintf("%s  %s: %s (%s)\n\n", v.p.elapsed(), v.label, v.verdict.Summary, time.Since(v.began).Round(time.Second))
	text := header + indent(v.render())
	prefix := ""
	if v.drawnLines > 0 {
		prefix = fmt.Sprintf("\x1b[%dA\r\x1b[J", v.drawnLines)
	}
	v.drawnLines = screenRows(text, terminalWidth(v.out))
	return v.write(prefix + text)
}

// sgr matches the colour sequences, which take no room on screen.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// screenRows is how many terminal rows text takes, counting the lines a
// narrow terminal wraps, so that the next redraw moves up exactly over it.
func screenRows(text string, width int) int {
	rows := 0
	for line := range strings.Lines(text) {
		n := utf8.RuneCountInString(sgr.ReplaceAllString(strings.TrimRight(line, "\n"), ""))
		rows += max(1, (n+width-1)/width)
	}
	return rows
}

// terminalWidth is out's width, 80 when it cannot be told.
func terminalWidth(out io.Writer) int {
	if f, ok := out.(interface{ Fd() uintptr }); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return 80
}

func (v *liveView) write(text string) error {
	if _, err := io.WriteString(v.out, text); err != nil {
		return fmt.Errorf("writing the view: %w", err)
	}
	return nil
}

func indent(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) != "" {
			b.WriteString("    ")
		}
		b.WriteString(line)
	}
	return b.String()
}
