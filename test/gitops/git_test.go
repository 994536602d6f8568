package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitServer is git's own smart-HTTP server (git http-backend behind Go's
// CGI handler) on a loopback port, serving the bare repositories under its
// root, pushes included.
type gitServer struct {
	root string
	url  string
}

func startGitServer(t *testing.T) *gitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git is needed (Debian package git): %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend: %v", err)
	}
	root := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &gitServer{root: root, url: "http://" + l.Addr().String()}
}

// repo is a working copy whose origin is a bare repository on the server;
// every commit is pushed through the server at once.
type repo struct {
	t    *testing.T
	dir  string
	url  string
	head string
}

func (s *gitServer) newRepo(t *testing.T, name string) *repo {
	t.Helper()
	bare := filepath.Join(s.root, name+".git")
	git(t, "", "init", "-q", "--bare", "-b", "main", bare)
	// Pushes over HTTP without authentication.
	git(t, bare, "config", "http.receivepack", "true")
	r := &repo{t: t, dir: t.TempDir(), url: s.url + "/" + name + ".git"}
	git(t, r.dir, "init", "-q", "-b", "main")
	git(t, r.dir, "remote", "add", "origin", r.url)
	return r
}

// commit writes files (a nil content deletes the file), commits them with
// message and pushes; it returns the commit's hash.
func (r *repo) commit(message string, files map[string][]byte) string {
	r.t.Helper()
	for p, content := range files {
		full := filepath.Join(r.dir, p)
		if content == nil {
			git(r.t, r.dir, "rm", "-q", p)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			r.t.Fatal(err)
		}
		git(r.t, r.dir, "add", p)
	}
	git(r.t, r.dir, "commit", "-q", "-m", message)
	return r.push()
}

// revert commits `git revert` of commit and pushes it.
func (r *repo) revert(commit string) string {
	r.t.Helper()
	git(r.t, r.dir, "revert", "--no-edit", commit)
	return r.push()
}

func (r *repo) push() string {
	r.t.Helper()
	git(r.t, r.dir, "push", "-q", "origin", "main")
	r.head = strings.TrimSpace(git(r.t, r.dir, "rev-parse", "HEAD"))
	return r.head
}

// read is a file of the working copy.
func (r *repo) read(p string) []byte {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, p))
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitOutput(t.Context(), dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Stepwise test", "GIT_AUTHOR_EMAIL=test@stepwise.dev",
		"GIT_COMMITTER_NAME=Stepwise test", "GIT_COMMITTER_EMAIL=test@stepwise.dev",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
