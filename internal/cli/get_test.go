package cli

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestDisplayTerminal checks the --watch redraw on a terminal: the first
// draw clears the screen, each draw starts at the top-left corner and
// clears what a longer previous view left below.
func TestDisplayTerminal(t *testing.T) {
	var out strings.Builder
	d := &display{out: &out, o: GetOptions{Watch: true, Terminal: true, Now: func() time.Time { return testNow }}}
	v := viewCases()["waiting for pods"]
	s := Snapshot{Rollout: v.Rollout, Workload: v.Workload}
	if err := d.show(s); err != nil {
		t.Fatal(err)
	}
	if err := d.redraw(); err != nil {
		t.Fatal(err)
	}
	view := RenderRollout(v, ViewOptions{Now: testNow})
	want := "\x1b[2J\x1b[H" + view + "\x1b[J" + "\x1b[H" + view + "\x1b[J"
	if out.String() != want {
		t.Errorf("terminal output:\n%q\nwant:\n%q", out.String(), want)
	}
}

// TestDisplayAppends checks --watch into a pipe or a file: whole views, one
// after the other, and a line for a deleted Rollout.
func TestDisplayAppends(t *testing.T) {
	var out strings.Builder
	d := &display{out: &out, o: GetOptions{Watch: true, Now: func() time.Time { return testNow }}}
	v := viewCases()["timed pause"]
	if err := d.show(Snapshot{Rollout: v.Rollout, Workload: v.Workload}); err != nil {
		t.Fatal(err)
	}
	if err := d.show(Snapshot{}); err != nil {
		t.Fatal(err)
	}
	want := RenderRollout(v, ViewOptions{Now: testNow}) + "\nThe rollout was deleted; waiting for it to come back.\n"
	assertText(t, out.String(), want)
	if strings.Contains(out.String(), "\x1b") {
		t.Error("escape sequences outside a terminal")
	}
}

func TestPipeIsNoTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = r.Close(), w.Close() }()
	if IsTerminal(w) || ColorEnabled(w, func(string) string { return "" }) {
		t.Error("a pipe taken for a terminal")
	}
}
