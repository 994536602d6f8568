package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestPkgPromises holds every package under pkg/, what other programs may
// import, to what docs/architecture.md promises of it: a package example
// (a func Example in a test file) and a "# Stability" section in its
// package documentation.
func TestPkgPromises(t *testing.T) {
	root := filepath.Join("..", "..", "pkg")
	promises := pkgPromises(t, root)
	if len(promises) < 4 {
		t.Fatalf("read %d packages under %s, want at least 4 (analysis, its judge and prometheus, inplace)", len(promises), root)
	}
	for dir, p := range promises {
		if !p.example {
			t.Errorf("pkg/%s: no Example function in its tests; a package others import shows how it is used", dir)
		}
		if !p.stability {
			t.Errorf("pkg/%s: its package documentation has no \"# Stability\" section saying what may change and where that is told", dir)
		}
	}
}

type promise struct{ example, stability bool }

// pkgPromises reads, for each directory with Go code below root, whether
// its tests hold an Example function and its package comment a Stability
// heading.
func pkgPromises(t *testing.T, root string) map[string]*promise {
	t.Helper()
	fset := token.NewFileSet()
	promises := map[string]*promise{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		p := promises[rel]
		if p == nil {
			p = &promise{}
			promises[rel] = p
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			for _, decl := range file.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
					p.example = true
				}
			}
			return nil
		}
		if file.Doc != nil && strings.Contains(file.Doc.Text(), "# Stability") {
			p.stability = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", root, err)
	}
	return promises
}
