package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/stepwise-dev/stepwise"

// rule says what packages under a path prefix may not import (prefixes of
// module-relative paths), and why.
type rule struct {
	from    string
	except  string // a prefix below from that the rule leaves alone
	never   []string
	because string
}

// rules are docs/architecture.md's, in its words.
var rules = []rule{
	{from: "api/", never: []string{"pkg/", "controllers/", "internal/", "cmd/", "test/", "hack/"},
		because: "the API is the bottom: code that writes Rollouts builds nothing else"},
	{from: "pkg/", never: []string{"controllers/", "internal/", "cmd/", "test/", "hack/"},
		because: "pkg/ is what others import; it cannot lean on what they cannot import"},
	{from: "controllers/", never: []string{"internal/", "cmd/", "test/", "hack/"},
		because: "the controllers own what they need; the manager's setup and the plugin sit above them"},
	{from: "internal/cli", never: []string{"controllers/", "internal/manager", "cmd/"},
		because: "the plugin's views read the API, not the controllers"},
	{from: "internal/dashboard", never: []string{"controllers/", "internal/manager", "cmd/"},
		because: "the plugin's views read the API, not the controllers"},
	{from: "internal/", never: []string{"cmd/", "test/"},
		because: "the binaries and the tests are the top"},
	{from: "cmd/", never: []string{"test/", "hack/", "internal/testsupport/"},
		because: "what ships links no test code"},
	{from: "internal/", except: "internal/testsupport/", never: []string{"internal/testsupport/"},
		because: "test support is for _test.go files: what ships links none of it"},
}

// violations returns "from -> imported: because" for each import of
// imports (module-relative package dir -> module-relative imports) that a
// rule forbids.
func violations(imports map[string][]string) []string {
	var out []string
	for from, deps := range imports {
		for _, r := range rules {
			if !under(from, r.from) || (r.except != "" && under(from, r.except)) {
				continue
			}
			for _, dep := range deps {
				for _, never := range r.never {
					if under(dep, never) && !under(dep, from) {
						out = append(out, from+" -> "+dep+": "+r.because)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// under reports whether pkg is prefix or below it; a prefix ending in "/"
// matches any package below that directory.
func under(pkg, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(pkg+"/", prefix)
	}
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// moduleImports is fileImports keeping the module's own, module-relative.
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	for rel, paths := range fileImports(t, root) {
		imports[rel] = nil
		for _, p := range paths {
			if dep, ok := strings.CutPrefix(p, module+"/"); ok {
				imports[rel] = append(imports[rel], dep)
			}
		}
	}
	return imports
}

// fileImports reads the imports of every non-test Go file of the main
// module below root, by module-relative package directory.
func fileImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			// A nested module (test/, hack/release, hack's pinned builds)
			// is not this module.
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := imports[rel]; !ok {
			imports[rel] = nil
		}
		for _, spec := range f.Imports {
			imports[rel] = append(imports[rel], strings.Trim(spec.Path.Value, `"`))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

func TestImportRules(t *testing.T) {
	imports := moduleImports(t, filepath.Join("..", ".."))
	// The scan read the tree, not an empty directory.
	for pkg, dep := range map[string]string{
		"controllers/rollout": "pkg/analysis",
		"internal/manager":    "controllers/rollout",
		"cmd/manager":         "internal/manager",
	} {
		if !slices.Contains(imports[pkg], dep) {
			t.Fatalf("%s does not import %s, or the scan missed it: %v", pkg, dep, imports[pkg])
		}
	}
	for _, v := range violations(imports) {
		t.Error(v)
	}
}

// The rules catch the arrows they are about.
func TestViolations(t *testing.T) {
	got := violations(map[string][]string{
		"controllers/rollout":           {"internal/manager", "controllers/index", "pkg/analysis"},
		"pkg/analysis/judge":            {"pkg/analysis", "controllers/rollout/step"},
		"api/v1alpha1":                  {"pkg/inplace"},
		"internal/cli":                  {"api/v1alpha1", "controllers/rollout/traffic"},
		"internal/manager":              {"controllers/rollout", "internal/testsupport/envtestenv"},
		"internal/testsupport/promtest": {"internal/testsupport/promrunner"},
		"cmd/kubectl-stepwise":          {"internal/cli", "test/kwokcluster"},
		"controllers/internal/":         {"controllers/index"},
	})
	want := []string{
		"api/v1alpha1 -> pkg/inplace: " + rules[0].because,
		"cmd/kubectl-stepwise -> test/kwokcluster: " + rules[6].because,
		"controllers/rollout -> internal/manager: " + rules[2].because,
		"internal/cli -> controllers/rollout/traffic: " + rules[3].because,
		"internal/manager -> internal/testsupport/envtestenv: " + rules[7].because,
		"pkg/analysis/judge -> controllers/rollout/step: " + rules[1].because,
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
