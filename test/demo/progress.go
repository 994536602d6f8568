package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress prints the story: steps in bold, details indented, each line
// stamped with the time since the start so that the reader sees where the
// minutes go. It is safe for concurrent use (Prometheus starts beside the
// manager and both log).
type progress struct {
	// out is shared by everything the demo prints, from several goroutines.
	out   *lockedWriter
	color bool
	began time.Time
}

func newProgress(out io.Writer, color bool) *progress {
	return &progress{out: &lockedWriter{w: out}, color: color, began: time.Now()}
}

// lockedWriter serializes writes, so that lines of concurrent writers do
// not interleave (and a test's bytes.Buffer sees no data race).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Fd exposes the terminal underneath, for its width.
func (l *lockedWriter) Fd() uintptr {
	if f, ok := l.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

func (p *progress) elapsed() string {
	return fmt.Sprintf("[%5.1fs]", time.Since(p.began).Seconds())
}

func (p *progress) line(text string) {
	_, _ = io.WriteString(p.out, text+"\n")
}

// step starts a chapter of the story.
func (p *progress) step(format string, args ...any) {
	p.line("\n" + p.elapsed() + " " + p.paint("1", "==> "+fmt.Sprintf(format, args...)))
}

// detail is a line under the current step; its signature fits Logf fields.
func (p *progress) detail(format string, args ...any) {
	text := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	p.line(p.elapsed() + "     " + strings.ReplaceAll(text, "\n", "\n             "))
}

func (p *progress) warn(format string, args ...any) {
	p.line(p.elapsed() + "     " + p.paint("33", "! "+fmt.Sprintf(format, args...)))
}

// paint wraps s in an SGR sequence when colour is on.
func (p *progress) paint(sgr, s string) string {
	if !p.color {
		return s
	}
	return "\x1b[" + sgr + "m" + s + "\x1b[0m"
}
