package commands

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// run executes a command line in-process, as main does.
func run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	// A kubeconfig that does not exist: these command lines must fail
	// before any client is made.
	args = append(args, "--kubeconfig", "/nonexistent/kubeconfig")
	code = Execute(context.Background(), streams, args, Options{})
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "web"}, "error: --steps is required"},
		{[]string{"plan", "web", "--steps", "100%", "--analysis-template", "cluster:Bad"}, `error: --analysis-template: "cluster:Bad" is not NAME or cluster:NAME`},
		{[]string{"plan", "web", "--steps", "100%", "--background-template", "x", "--analysis-arg", "service"}, `error: --analysis-arg: "service" is not NAME=VALUE`},
		{[]string{"plan", "web", "--steps", "10%,150%"}, `error: --steps: "150%" is not a percent between 1% and 100%`},
		{[]string{"plan", "web", "--steps", "50%,10%,100%"}, `error: --steps: "10%" after 50%: steps must update more pods each time`},
		{[]string{"plan", "web", "--steps", "10%,50%"}, "error: --steps: the last step is 50%: it must be 100%"},
		{[]string{"plan", "web", "--steps", "100%", "--pause", "-1m"}, `error: --pause: "-1m" is neither a positive duration`},
		{[]string{"plan", "web", "--steps", "100%", "--error-rate-max", "1%", "--prometheus", "http://p:9090"}, `error: --error-rate-max: "1%" is not a ratio between 0 and 1 (a ratio: 1% is 0.01)`},
		{[]string{"plan", "web", "--steps", "100%", "--error-rate-max", "0.01"}, "error: --prometheus is required with --error-rate-max"},
		{[]string{"plan", "web", "--steps", "100%", "--prometheus", "http://p:9090"}, "error: --error-rate-max is required with --prometheus"},
		{[]string{"plan", "web", "--steps", "100%", "--error-rate-max", "0.01", "--prometheus", "prometheus:9090"}, `error: --prometheus: "prometheus:9090" is not an http or https URL`},
		{[]string{"plan", "web", "--steps", "100%", "--version-constraint", "~>banana"}, `error: --version-constraint: "~>banana" is not a semver constraint`},
		{[]string{"plan", "web", "--steps", "100%", "-o", "table"}, `error: -o: "table" is not supported: use yaml or json`},
		{[]string{"plan"}, "error: CloneSet NAME is required"},
		{[]string{"plan", "-f", "cloneset.yaml", "web", "api", "--steps", "100%"}, "error: one CloneSet NAME is expected, got web api"},
		{[]string{"plan", "web", "--steps", "100%", "--name", "Web_1"}, `error: --name: "Web_1" is not a valid object name: a lowercase RFC 1123 subdomain`},
		{[]string{"get"}, "error: a resource type and NAME are required: get rollout NAME"},
		{[]string{"get", "rollout"}, "error: rollout NAME is required"},
		{[]string{"get", "deployment", "web"}, `error: resource type "deployment" is not supported: only rollout is`},
		{[]string{"get", "rollout", "a", "b"}, "error: one rollout NAME is expected, got a b"},
		{[]string{"get", "rollout/web", "-o", "wide"}, `error: -o: "wide" is not supported`},
		{[]string{"get", "rollout", "web", "--measurements", "0"}, "error: --measurements: 0 is not a positive count"},
		{[]string{"status"}, "error: rollout NAME is required"},
		{[]string{"status", "web", "--timeout", "-1s"}, "error: --timeout: -1s is negative"},
		{[]string{"status", "web", "--timeout", "soon"}, `error: invalid argument "soon" for "--timeout" flag`},
		{[]string{"promote"}, "error: rollout NAME is required"},
		{[]string{"abort", "a", "b"}, "error: one rollout NAME is expected, got a b"},
		{[]string{"resume", "web", "-o", "name"}, `error: -o: "name" is not supported`},
		{[]string{"promote", "web", "--bogus"}, "error: unknown flag: --bogus"},
		{[]string{"list", "web"}, "error: kubectl stepwise list takes no arguments, got web"},
		{[]string{"set"}, "error: a subcommand is required: set image"},
		{[]string{"set", "image"}, "error: a CloneSet is required: set image cloneset/NAME CONTAINER=IMAGE"},
		{[]string{"set", "image", "deployment/web", "app=web:2"}, `error: resource type "deployment" is not supported: only cloneset is`},
		{[]string{"set", "image", "cloneset", "app=web:2"}, "error: cloneset NAME is required"},
		{[]string{"set", "image", "cloneset/web"}, "error: at least one CONTAINER=IMAGE is required"},
		{[]string{"set", "image", "clone", "web", "app"}, `error: "app" is not CONTAINER=IMAGE`},
		{[]string{"undo"}, "error: rollout NAME is required"},
		{[]string{"undo", "a", "b"}, "error: one rollout NAME is expected, got a b"},
		{[]string{"lint"}, "error: -f is required: the files to check"},
		{[]string{"version", "extra"}, "error: kubectl stepwise version takes no arguments, got extra"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(c.args...)
			if code != ExitError {
				t.Errorf("exit code %d, want %d", code, ExitError)
			}
			if !strings.HasPrefix(stderr, c.want) {
				t.Errorf("stderr:\n%s\nwant it to start with:\n%s", stderr, c.want)
			}
			if !strings.Contains(stderr, "See 'kubectl stepwise "+c.args[0]) || !strings.Contains(stderr, " --help' for usage.") {
				t.Errorf("stderr has no pointer to the command's help:\n%s", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout is not empty:\n%s", stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := run("--help")
	if code != ExitOK {
		t.Fatalf("exit code %d", code)
	}
	for _, want := range []string{"kubectl stepwise [command]", "get ", "list", "promote", "abort", "retry", "pause", "resume", "status", "plan",
		"lint", "set ", "undo", "version", "completion", "--namespace", "--context", "--kubeconfig"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = run("promote", "--help")
	if code != ExitOK || !strings.Contains(stdout, "stepwise.dev/promote-at") {
		t.Errorf("promote --help (exit %d) does not name its annotation:\n%s", code, stdout)
	}
	// The controller ends one stage per promote (controllers/rollout/step,
	// pauseOver): a step with a pause and an analysis needs two.
	flat := strings.Join(strings.Fields(stdout), " ")
	for _, want := range []string{"ends one stage of the current step", "a running pause, or else the analysis", "a second promote to skip its analysis", "is ignored"} {
		if !strings.Contains(flat, want) {
			t.Errorf("promote --help does not say %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(flat, "pause and analysis") {
		t.Errorf("promote --help claims one promote skips both the pause and the analysis:\n%s", stdout)
	}
}

// TestFreshCommands checks that nothing is shared between two command
// trees: a flag set in one run must not leak into the next.
func TestFreshCommands(t *testing.T) {
	var out bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	a := NewRootCommand(streams, Options{})
	b := NewRootCommand(streams, Options{})
	if err := a.PersistentFlags().Set("namespace", "shop"); err != nil {
		t.Fatal(err)
	}
	if ns := b.PersistentFlags().Lookup("namespace").Value.String(); ns != "" {
		t.Errorf("second command tree sees namespace %q", ns)
	}
}
