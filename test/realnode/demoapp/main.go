// Command demoapp is the application the real-node tests deliver: one
// binary whose behaviour follows the tag of the image it runs in. The image
// build puts the tag into DEMO_VERSION; a tag ending in "-bad" answers every
// fifth request with a 500 (20%), any other tag answers 200.
//
// It serves on :8080:
//   - /         the answer (version and instance in the body)
//   - /instance JSON {version, instance, started, firstInstance}: a new
//     process has a new instance id, so a test can tell that the old one
//     really stopped; with $DATA_DIR set, firstInstance is the id the first
//     process to run over that directory wrote there, so a test can tell
//     whether a volume outlived the process
//   - /metrics  http_requests_total{code} in Prometheus' text format
//   - /healthz  readiness
//
// and prints its version, start time and instance id when it starts.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// info is what /instance answers.
type info struct {
	Version  string    `json:"version"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
	// FirstInstance is read from $DATA_DIR/first-instance, which the first
	// process to find it missing writes.
	FirstInstance string `json:"firstInstance,omitempty"`
}

// firstInstance returns the instance id kept in dir, writing id there
// when there is none yet.
func firstInstance(dir, id string) (string, error) {
	path := filepath.Join(dir, "first-instance")
	data, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return id, os.WriteFile(path, []byte(id+"\n"), 0o644)
}

// app counts answers by code.
type app struct {
	info
	bad bool

	mu     sync.Mutex
	served uint64
	codes  map[int]uint64
}

// code decides the answer to the n-th request (from 1): a bad release fails
// every fifth one, so its error rate is exactly 20% over any five requests.
func code(bad bool, n uint64) int {
	if bad && n%5 == 0 {
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

func (a *app) serve(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	a.served++
	c := code(a.bad, a.served)
	a.codes[c]++
	a.mu.Unlock()
	w.WriteHeader(c)
	_, _ = fmt.Fprintf(w, "version=%s instance=%s code=%d\n", a.Version, a.Instance, c)
}

func (a *app) metrics(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = fmt.Fprintln(w, "# HELP http_requests_total Requests answered, by status code.")
	_, _ = fmt.Fprintln(w, "# TYPE http_requests_total counter")
	// Both series exist from the start, so that rate() over a fresh
	// process is 0 rather than absent.
	for _, c := range []int{http.StatusOK, http.StatusInternalServerError} {
		_, _ = fmt.Fprintf(w, "http_requests_total{code=\"%d\"} %d\n", c, a.codes[c])
	}
}

func main() {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		log.Fatalf("instance id: %v", err)
	}
	version := os.Getenv("DEMO_VERSION")
	a := &app{
		info:  info{Version: version, Instance: hex.EncodeToString(id), Started: time.Now().UTC()},
		bad:   strings.HasSuffix(version, "-bad"),
		codes: map[int]uint64{},
	}
	if dir := os.Getenv("DATA_DIR"); dir != "" {
		first, err := firstInstance(dir, a.Instance)
		if err != nil {
			log.Fatalf("DATA_DIR: %v", err)
		}
		a.FirstInstance = first
	}
	fmt.Printf("demoapp version=%s instance=%s started=%s\n", a.Version, a.Instance, a.Started.Format(time.RFC3339Nano))

	mux := http.NewServeMux()
	mux.HandleFunc("/", a.serve)
	mux.HandleFunc("/metrics", a.metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/instance", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.info)
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
