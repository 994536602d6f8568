package layout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoModListsWhatShips keeps the root go.mod lean: each of its direct
// requirements is imported by code of the main module that is not a test
// and not test support. A test that needs another module belongs in the
// test module (test/), the release tooling's in hack/release.
func TestGoModListsWhatShips(t *testing.T) {
	root := filepath.Join("..", "..")
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	direct := directRequirements(string(gomod))
	if len(direct) < 5 {
		t.Fatalf("read %d direct requirements from go.mod (%v): the parse is broken", len(direct), direct)
	}
	shipped := map[string]bool{}
	for dir, paths := range fileImports(t, root) {
		if under(dir, "internal/testsupport/") {
			continue
		}
		for _, p := range paths {
			shipped[p] = true
		}
	}
	for _, mod := range direct {
		if !importsModule(shipped, mod) {
			t.Errorf("go.mod requires %s directly, but only tests or test support import it: move those tests to the test module (test/)", mod)
		}
	}
}

// directRequirements are the module paths of go.mod's require lines that
// are not marked indirect.
func directRequirements(gomod string) []string {
	var mods []string
	inBlock := false
	for line := range strings.Lines(gomod) {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		if fields := strings.Fields(line); len(fields) >= 2 && !strings.Contains(line, "// indirect") {
			mods = append(mods, fields[0])
		}
	}
	return mods
}

// importsModule reports whether any of imports is a package of module mod.
func importsModule(imports map[string]bool, mod string) bool {
	for p := range imports {
		if p == mod || strings.HasPrefix(p, mod+"/") {
			return true
		}
	}
	return false
}

func TestDirectRequirements(t *testing.T) {
	got := directRequirements("module m\n\ngo 1.26\n\nrequire a.io/one v1.0.0\n\nrequire (\n\tb.io/two v0.1.0\n\tc.io/three v0.2.0 // indirect\n)\n\nrequire (\n\td.io/four/v2 v2.0.0\n)\n")
	if strings.Join(got, " ") != "a.io/one b.io/two d.io/four/v2" {
		t.Errorf("directRequirements = %v, want [a.io/one b.io/two d.io/four/v2]", got)
	}
}
