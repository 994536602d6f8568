package promrunner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartScrapesBeforeReturning checks the promise callers rely on: the
// first query after Start already sees every target's samples.
func TestStartScrapesBeforeReturning(t *testing.T) {
	if _, err := Available(Options{}); err != nil {
		t.Fatal(err) // CI installs prometheus; a skip would hide a broken runner
	}
	targets := make([]string, 2)
	for i := range targets {
		value := i + 1
		exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprintf(w, "# TYPE demo_value gauge\ndemo_value %d\n", value)
		}))
		t.Cleanup(exporter.Close)
		targets[i] = strings.TrimPrefix(exporter.URL, "http://")
	}

	began := time.Now()
	p, err := Start(t.Context(), targets, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started and scraped in %s", time.Since(began).Round(time.Millisecond))
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") {
		t.Errorf("URL() = %q, want loopback", p.URL())
	}

	resp, err := http.Get(p.URL() + "/api/v1/query?query=" + url.QueryEscape("sum(demo_value)"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Data.Result) != 1 || body.Data.Result[0].Value[1] != "3" {
		t.Errorf("sum(demo_value) right after Start = %+v, want 3", body.Data.Result)
	}

	p.Stop()
	p.Stop() // safe twice
	if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left after Stop: %v", p.dir, err)
	}
	if _, err := http.Get(p.URL() + "/-/ready"); err == nil {
		t.Error("prometheus still answers after Stop")
	}
}

func TestMissingBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "prometheus")
	if _, err := Available(Options{Binary: missing}); err == nil || !strings.Contains(err.Error(), InstallHint) {
		t.Errorf("Available(missing) = %v, want an error with %q", err, InstallHint)
	}
	t.Setenv(BinaryEnv, missing)
	if _, err := Start(context.Background(), nil, Options{}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Start with %s=%s: %v, want an error naming it", BinaryEnv, missing, err)
	}
}

// TestUnreachableTarget checks that Start fails, and leaves nothing behind,
// when a target never answers, instead of returning a Prometheus without data.
func TestUnreachableTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a start timeout")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	// A closed port: the listener is gone before Prometheus scrapes.
	dead := httptest.NewServer(http.NotFoundHandler())
	target := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()
	if _, err := Start(ctx, []string{target}, Options{}); err == nil {
		t.Fatal("Start succeeded with a dead target")
	} else {
		t.Logf("as expected: %.300s", err)
	}
}
