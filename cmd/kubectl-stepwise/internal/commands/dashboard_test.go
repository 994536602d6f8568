package commands

import (
	"strings"
	"testing"
)

func TestDashboardUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"dashboard", "web"}, "error: dashboard takes no arguments, got [web]"},
		{[]string{"dashboard", "--port", "70000"}, "error: --port: 70000 is not a port number (0 picks a free port)"},
		{[]string{"dashboard", "--port", "-1"}, "error: --port: -1 is not a port number"},
		{[]string{"dashboard", "-A", "-n", "shop"}, "error: --all-namespaces and --namespace cannot be combined"},
		{[]string{"dashboard", "--address", "0.0.0.0"}, "error: unknown flag: --address"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(c.args...)
			if code != ExitError || !strings.HasPrefix(stderr, c.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant it to start with:\n%s", code, stdout, stderr, c.want)
			}
			if !strings.Contains(stderr, "See 'kubectl stepwise dashboard --help' for usage.") {
				t.Errorf("no pointer to the help:\n%s", stderr)
			}
		})
	}
}

func TestDashboardHelp(t *testing.T) {
	code, stdout, _ := run("dashboard", "--help")
	flat := strings.Join(strings.Fields(stdout), " ")
	for _, want := range []string{"--port", "--all-namespaces", "--open", "listens on 127.0.0.1 only", "kubeconfig's credentials and nothing more"} {
		if !strings.Contains(flat, want) {
			t.Errorf("dashboard --help (exit %d) lacks %q:\n%s", code, want, stdout)
		}
	}
	code, stdout, _ = run("--help")
	if code != ExitOK || !strings.Contains(stdout, "dashboard") {
		t.Errorf("the root help does not list dashboard:\n%s", stdout)
	}
}
