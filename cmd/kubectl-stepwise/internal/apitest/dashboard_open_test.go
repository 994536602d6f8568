package apitest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
	"github.com/stepwise-dev/stepwise/internal/testsupport/syncbuf"
)

// The page `dashboard --open` hands the desktop's opener holds the
// session token. These tests give the dashboard an opener of their own (a
// script named xdg-open and open, first on PATH, that notes the file it is
// given) and a temporary directory of their own (TMPDIR), and check that
// the page is there while the dashboard runs and gone once it stops,
// however it stops.

var sessionToken = regexp.MustCompile(`\?token=([A-Za-z0-9_-]+)`)

// fakeOpener puts an opener first on PATH and returns the file where it
// notes each target it is given.
func fakeOpener(t *testing.T) (noted string) {
	t.Helper()
	dir := t.TempDir()
	noted = filepath.Join(t.TempDir(), "opened")
	script := "#!/bin/sh\necho \"$1\" >> '" + noted + "'\n"
	for _, name := range []string{"xdg-open", "open"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return noted
}

// privateTempDir makes TMPDIR a directory of the test's own.
func privateTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

// openedPage waits for the opener to be given a page and returns its path.
func openedPage(t *testing.T, noted string, stopped <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(noted); err == nil && strings.HasSuffix(string(b), "\n") {
			target := strings.TrimSpace(string(b))
			if !strings.HasPrefix(target, "file://") {
				t.Fatalf("the opener was given %q, want a file:// URL", target)
			}
			return strings.TrimPrefix(target, "file://")
		}
		select {
		case <-stopped:
			t.Fatal("the dashboard stopped before handing the opener a page")
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the opener was given nothing")
	return ""
}

// checkPage checks that the page is this user's alone and leads to the
// dashboard's URL, token included, and returns the token.
func checkPage(t *testing.T, page, stdout string) string {
	t.Helper()
	info, err := os.Stat(page)
	if err != nil {
		t.Fatalf("the page handed to the opener is gone while the dashboard runs: %v", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("the page is readable by others: %v", perm)
	}
	m := sessionToken.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no session token in the output:\n%s", stdout)
	}
	if b, _ := os.ReadFile(page); !strings.Contains(string(b), m[1]) {
		t.Errorf("the page does not lead to the session: %s", b)
	}
	return m[1]
}

// pagesLeft lists the dashboard pages in dir.
func pagesLeft(t *testing.T, dir string) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, "stepwise-dashboard-*"))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// TestDashboardOpenRemovesItsPageWhenStopped: the page is removed when the
// dashboard's context ends, which is what Ctrl-C and SIGTERM do to it.
func TestDashboardOpenRemovesItsPageWhenStopped(t *testing.T) {
	tmp := privateTempDir(t)
	noted := fakeOpener(t)
	ns := newNamespace(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := start(ctx, ns, commands.Options{}, "dashboard", "--open")
	r.waitForOutput(t, "Press Ctrl-C to stop.")
	page := openedPage(t, noted, nil)
	if filepath.Dir(page) != tmp {
		t.Errorf("the page %s is not in TMPDIR %s", page, tmp)
	}
	checkPage(t, page, r.stdout.String())

	cancel()
	res := r.wait(t, time.Minute)
	if res.code != commands.ExitOK {
		t.Errorf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	if _, err := os.Stat(page); !os.IsNotExist(err) {
		t.Errorf("the page holding the session token is left after the dashboard stopped (stat: %v)", err)
	}
	if left := pagesLeft(t, tmp); len(left) > 0 {
		t.Errorf("pages left in TMPDIR: %v", left)
	}
}

// TestDashboardOpenRemovesItsPageWhenNoOpener: a page no opener could
// take is removed at once, while the dashboard goes on.
func TestDashboardOpenRemovesItsPageWhenNoOpener(t *testing.T) {
	tmp := privateTempDir(t)
	t.Setenv("PATH", t.TempDir())
	ns := newNamespace(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := start(ctx, ns, commands.Options{}, "dashboard", "--open")
	r.waitForOutput(t, "Press Ctrl-C to stop.")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(r.stderr.String(), "could not open a browser") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the missing opener; stderr:\n%s", r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := pagesLeft(t, tmp); len(left) > 0 {
		t.Errorf("the page no opener took is left while the dashboard runs: %v", left)
	}
	cancel()
	if res := r.wait(t, time.Minute); res.code != commands.ExitOK {
		t.Errorf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
}

// TestDashboardOpenRemovesItsPageOnSignal runs the plugin as users do, a
// process of its own, and stops it with SIGINT (Ctrl-C) or SIGTERM. Each
// run draws its own session token, so a page left by one that was killed
// outright opens nothing in the next.
func TestDashboardOpenRemovesItsPageOnSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubectl-stepwise")
	build := exec.Command("go", "build", "-o", bin, "github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-stepwise: %v\n%s", err, out)
	}
	ns := newNamespace(t)
	tokens := map[string]bool{}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := privateTempDir(t)
			noted := fakeOpener(t)
			stdout := &syncbuf.Buffer{}
			cmd := exec.Command(bin, "dashboard", "--open", "--kubeconfig", env.kubeconfig, "-n", ns)
			cmd.Stdout, cmd.Stderr = stdout, os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			stopped := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(stopped) }()
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-stopped })
			page := openedPage(t, noted, stopped)
			for deadline := time.Now().Add(time.Minute); !strings.Contains(stdout.String(), "Press Ctrl-C to stop."); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the dashboard printed no URL:\n%s", stdout)
				}
			}
			token := checkPage(t, page, stdout.String())
			if tokens[token] {
				t.Errorf("the session token %s was drawn by an earlier run", token)
			}
			tokens[token] = true

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-stopped:
			case <-time.After(time.Minute):
				t.Fatalf("the dashboard did not stop on %v", sig)
			}
			if waitErr != nil {
				t.Errorf("the dashboard ended with %v on %v", waitErr, sig)
			}
			if _, err := os.Stat(page); !os.IsNotExist(err) {
				t.Errorf("the page holding the session token is left after %v (stat: %v)", sig, err)
			}
			if left := pagesLeft(t, tmp); len(left) > 0 {
				t.Errorf("pages left in TMPDIR: %v", left)
			}
		})
	}
}
