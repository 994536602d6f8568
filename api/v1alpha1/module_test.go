package v1alpha1

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestTheAPILinksOnlyTypes: api/v1alpha1 is a package of the main module,
// and Go code that imports it to write Rollouts builds, besides the standard
// library, only k8s.io/apimachinery, k8s.io/api and Flux's condition types,
// and what those need themselves. Module graph pruning keeps the main
// module's other requirements (controller-runtime, Prometheus, gateway-api,
// the test tools) out of an importer's build; this test keeps the package
// from importing them.
func TestTheAPILinksOnlyTypes(t *testing.T) {
	const self = "github.com/stepwise-dev/stepwise/api/v1alpha1"
	allowed := []string{"k8s.io/apimachinery/", "k8s.io/api/", "github.com/fluxcd/pkg/apis/meta"}

	var direct []string
	for _, p := range goList(t, `{{join .Imports "\n"}}`, self) {
		if !strings.Contains(strings.Split(p, "/")[0], ".") {
			continue // the standard library
		}
		if !slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(p, a) }) {
			t.Errorf("%s imports %s: only %s are allowed", self, p, strings.Join(allowed, ", "))
			continue
		}
		direct = append(direct, p)
	}
	if len(direct) == 0 {
		t.Fatalf("%s imports none of %s: the listing is wrong", self, strings.Join(allowed, ", "))
	}

	// Everything it links must be needed by those imports already.
	nonStd := `{{if not .Standard}}{{.ImportPath}}{{end}}`
	needed := goList(t, nonStd, append([]string{"-deps"}, direct...)...)
	var extra []string
	for _, p := range goList(t, nonStd, "-deps", self) {
		if p != self && !slices.Contains(needed, p) {
			extra = append(extra, p)
		}
	}
	if len(extra) > 0 {
		t.Errorf("%s links %d packages that none of %s needs, such as:\n%s",
			self, len(extra), strings.Join(direct, ", "), strings.Join(extra[:min(len(extra), 10)], "\n"))
	}
}

// goList runs go list with a template and returns its non-empty lines.
func goList(t *testing.T, format string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", format}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	var lines []string
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}
