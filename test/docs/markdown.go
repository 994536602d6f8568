// Package docs runs the shell blocks of the documentation (make test-docs):
// README.md, docs/*.md and examples/*/README.md. Each block is run, in
// order, against a kwok cluster, or carries a marker saying why not.
//
// Markers are HTML comments on the last non-blank line before a block:
//
//	<!-- not-runnable: <reason> -->    the test skips the block; the reason is required
//	<!-- runs-until-interrupted -->    the command serves until stopped: the test
//	                                   starts it, waits for its first output, stops it
//	<!-- test-setup: <what> -->        the block needs something the test prepares
//	                                   first (setups below name what they do)
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// shellLangs are the fence languages whose blocks are commands.
var shellLangs = []string{"sh", "bash", "shell", "console"}

// Marker is what the comment before a block says.
type Marker int

const (
	// Run: no marker, the block runs and must exit 0.
	Run Marker = iota
	// NotRunnable: skipped, for the reason given.
	NotRunnable
	// Serve: runs until interrupted.
	Serve
	// Setup: runs after the named preparation.
	Setup
)

// Block is one shell block of a markdown file.
type Block struct {
	File string // relative to the repository
	Line int    // of the opening fence, 1-based
	Lang string
	// Body is the commands; for console blocks, the lines after "$ ".
	Body   string
	Marker Marker
	// Arg is the reason (NotRunnable) or the setup's name (Setup).
	Arg string
	// YAMLAbove is the body of the last yaml block before this one, for
	// setups that write it to a file.
	YAMLAbove string
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var (
	fenceRE  = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
	markerRE = regexp.MustCompile(`^\s*<!--\s*(not-runnable|runs-until-interrupted|test-setup)\s*(?::(.*?))?\s*-->\s*$`)
	// anyMarkerRE catches a misspelt marker, which would otherwise leave a
	// block unmarked without anyone noticing.
	anyMarkerRE = regexp.MustCompile(`^\s*<!--\s*(not-run|runs-until|test-set|notrunnable)`)
)

// Files lists the markdown files whose blocks the test runs, relative to root.
func Files(root string) ([]string, error) {
	var files []string
	for _, pattern := range []string{"README.md", "docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, err
		}
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				return nil, err
			}
			files = append(files, rel)
		}
	}
	return files, nil
}

// Extract returns the shell blocks of root/file in order.
func Extract(root, file string) ([]Block, error) {
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var (
		blocks   []Block
		lastLine string // the last non-blank line outside a block
		inFence  string // the open fence, "" outside
		cur      *Block
		body     []string
		n        int
		inYAML   bool
		yaml     []string
		lastYAML string
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		if inFence != "" {
			if strings.TrimSpace(line) == inFence || (strings.HasPrefix(strings.TrimSpace(line), inFence) && strings.Trim(strings.TrimSpace(line), inFence[:1]) == "") {
				inFence = ""
				if inYAML {
					lastYAML, inYAML = strings.Join(yaml, "\n")+"\n", false
				}
				if cur != nil {
					cur.Body = strings.Join(body, "\n") + "\n"
					blocks = append(blocks, *cur)
					cur = nil
				}
				lastLine = ""
				continue
			}
			if cur != nil {
				body = append(body, line)
			}
			if inYAML {
				yaml = append(yaml, line)
			}
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			inFence = m[1]
			if m[2] == "yaml" {
				inYAML, yaml = true, nil
			}
			if slices.Contains(shellLangs, m[2]) {
				b, err := newBlock(file, n, m[2], lastLine)
				if err != nil {
					return nil, err
				}
				b.YAMLAbove = lastYAML
				cur, body = &b, nil
			}
			continue
		}
		if strings.TrimSpace(line) != "" {
			lastLine = line
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inFence != "" {
		return nil, fmt.Errorf("%s: a code block is never closed", file)
	}
	for i := range blocks {
		if blocks[i].Lang == "console" {
			blocks[i].Body = consoleCommands(blocks[i].Body)
		}
	}
	return blocks, nil
}

func newBlock(file string, line int, lang, before string) (Block, error) {
	b := Block{File: file, Line: line, Lang: lang}
	m := markerRE.FindStringSubmatch(before)
	if m == nil {
		if anyMarkerRE.MatchString(before) {
			return b, fmt.Errorf("%s: unknown marker %q (known: not-runnable: <reason>, runs-until-interrupted, test-setup: <what>)", b, strings.TrimSpace(before))
		}
		return b, nil
	}
	b.Arg = strings.TrimSpace(m[2])
	switch m[1] {
	case "not-runnable":
		b.Marker = NotRunnable
	case "runs-until-interrupted":
		b.Marker = Serve
	case "test-setup":
		b.Marker = Setup
	}
	return b, nil
}

// consoleCommands keeps the "$ " lines of a console block, the rest being
// output.
func consoleCommands(body string) string {
	var cmds []string
	for _, l := range strings.Split(body, "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			cmds = append(cmds, c)
		}
	}
	return strings.Join(cmds, "\n") + "\n"
}

// Check reports every block whose marker is incomplete: a not-runnable
// block without a reason, a setup the test does not know.
func Check(blocks []Block, knownSetup func(string) bool) []string {
	var problems []string
	for _, b := range blocks {
		switch b.Marker {
		case NotRunnable:
			if b.Arg == "" {
				problems = append(problems, fmt.Sprintf("%s: not-runnable needs a reason: <!-- not-runnable: why -->", b))
			}
		case Setup:
			if !knownSetup(b.Arg) {
				problems = append(problems, fmt.Sprintf("%s: unknown test-setup %q", b, b.Arg))
			}
		case Serve:
			if b.Arg != "" {
				problems = append(problems, fmt.Sprintf("%s: runs-until-interrupted takes no argument", b))
			}
		}
	}
	return problems
}
