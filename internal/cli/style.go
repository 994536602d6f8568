package cli

import (
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// ColorEnabled follows https://no-color.org: colour only on a terminal and
// only when NO_COLOR is unset or empty. TERM=dumb terminals get none either.
func ColorEnabled(out io.Writer, getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false
	}
	return IsTerminal(out)
}

// IsTerminal reports whether out is a terminal, as opposed to a pipe, a
// file or a test buffer.
func IsTerminal(out io.Writer) bool {
	f, ok := out.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// color is an SGR parameter string; the empty color prints plain text.
type color string

const (
	plain  color = ""
	bold   color = "1"
	faint  color = "2"
	red    color = "31"
	green  color = "32"
	yellow color = "33"
	cyan   color = "36"
)

// painter applies colours when enabled, so rendering code never checks.
type painter struct{ enabled bool }

func (p painter) paint(c color, s string) string {
	if !p.enabled || c == plain || s == "" {
		return s
	}
	return "\x1b[" + string(c) + "m" + s + "\x1b[0m"
}

// cell is one table cell: its text, and the colour it is printed in. Widths
// are computed on the text alone, because escape sequences have no width and
// would misalign a text/tabwriter table.
type cell struct {
	text  string
	color color
}

// writeTable prints rows with columns padded to their widest cell, two
// spaces apart, each line prefixed by indent. Trailing blank cells are
// dropped so that lines carry no trailing spaces.
func writeTable(b *strings.Builder, p painter, indent string, rows [][]cell) {
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c.text))
		}
	}
	for _, row := range rows {
		last := len(row) - 1
		for last >= 0 && row[last].text == "" {
			last--
		}
		b.WriteString(indent)
		for i := 0; i <= last; i++ {
			c := row[i]
			b.WriteString(p.paint(c.color, c.text))
			if i < last {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c.text)+2))
			}
		}
		b.WriteString("\n")
	}
}
