package prometheus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func TestBudgetReserve(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(1000)
	if err := b.reserve(ctx, 600, true); err != nil {
		t.Fatal(err)
	}
	// Growth leaves a quarter free: 600+200 > 750.
	var be *BudgetError
	if err := b.reserve(ctx, 200, false); !errors.As(err, &be) || be.Waited {
		t.Fatalf("growth past three quarters: %v, want a *BudgetError at once", err)
	}
	if err := b.reserve(ctx, 150, false); err != nil {
		t.Fatalf("growth within three quarters: %v", err)
	}
	// First bytes may use the last quarter.
	if err := b.reserve(ctx, 250, true); err != nil {
		t.Fatalf("first bytes into the last quarter: %v", err)
	}
	if b.InUse() != 1000 || b.Peak() != 1000 {
		t.Fatalf("in use %d, peak %d, want 1000 and 1000", b.InUse(), b.Peak())
	}

	// Full: first bytes wait for a release...
	done := make(chan error)
	go func() { done <- b.reserve(ctx, 100, true) }()
	select {
	case err := <-done:
		t.Fatalf("reserve() returned %v on a full budget", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.release(150)
	if err := <-done; err != nil {
		t.Fatalf("reserve() after a release: %v", err)
	}
	// ...for as long as their query may last.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.reserve(short, 100, true); !errors.As(err, &be) || !be.Waited {
		t.Fatalf("reserve() until the deadline: %v, want a *BudgetError that waited", err)
	}
	if b.InUse() != 950 || b.Peak() != 1000 {
		t.Errorf("in use %d, peak %d, want 950 and 1000", b.InUse(), b.Peak())
	}
	if b.waiters != 0 {
		t.Errorf("%d waiters left", b.waiters)
	}
}

// atCap is an answer of many series just under MaxResponseBytes: the
// shape that decoded into maps of labels costs the most memory per byte.
var atCap = func() []byte {
	var sb strings.Builder
	sb.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	const tail = `]}}`
	for i := 0; ; i++ {
		s := fmt.Sprintf(`{"metric":{"pod":"web-%06d"},"value":[1700000000,"1"]}`, i)
		if sb.Len()+len(s)+1+len(tail) > MaxResponseBytes {
			break
		}
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(s)
	}
	sb.WriteString(tail)
	return []byte(sb.String())
}()

// Queries at the cap and honest ones share a budget: what is reserved
// never exceeds it, an answer it has no room for is an error that says so,
// never a value, and the honest queries are answered.
func TestBudgetBoundsAnswersAtTheCap(t *testing.T) {
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(atCap)
	}))
	defer hostile.Close()
	honest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(scalarBody))
	}))
	defer honest.Close()

	budget := NewBudget(DefaultBudget)
	var (
		wg                      sync.WaitGroup
		mu                      sync.Mutex
		refused, read, answered int
	)
	for i := range 160 {
		wg.Go(func() {
			p := newProvider(t, Config{Address: hostile.URL, Budget: budget})
			res, err := p.Query(context.Background(), fmt.Sprint("q", i))
			mu.Lock()
			defer mu.Unlock()
			var be *BudgetError
			switch {
			case errors.As(err, &be):
				refused++
				if !strings.Contains(err.Error(), "memory for reading analysis answers (32 MiB") {
					t.Errorf("budget error %q does not say what ran out", err)
				}
			case err != nil:
				t.Errorf("Query() at the cap: %v", err)
			case res.SeriesCount() < 10000 || len(res.Samples) != MaxSeriesValues:
				t.Errorf("Query() at the cap = %d series, %d samples kept", res.SeriesCount(), len(res.Samples))
			default:
				read++
			}
		})
	}
	for range 20 {
		wg.Go(func() {
			p := newProvider(t, Config{Address: honest.URL, Budget: budget})
			m := analysis.Measure(context.Background(), p, "up", analysis.Threshold{Max: ptr(0.01)})
			if m.Phase != analysis.PhaseSuccessful {
				t.Errorf("honest Measure() = %+v, want Successful", m)
			}
			mu.Lock()
			answered++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("at the cap: %d read, %d refused; budget peak %d MiB of %d MiB", read, refused, budget.Peak()>>20, budget.Limit()>>20)
	if budget.Peak() > budget.Limit() {
		t.Errorf("budget peak %d > limit %d", budget.Peak(), budget.Limit())
	}
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still reserved after every query returned", budget.InUse())
	}
	// Under 160 at once, which of them (if any) grows to the end is a race
	// the budget does not promise to win; that the budget, once free again,
	// reads an answer at the cap in full is what it promises.
	p := newProvider(t, Config{Address: hostile.URL, Budget: budget})
	if res, err := p.Query(context.Background(), "alone"); err != nil || len(res.Samples) != MaxSeriesValues {
		t.Errorf("an answer at the cap alone: %v (%d samples kept)", err, len(res.Samples))
	}
	if answered != 20 {
		t.Errorf("%d honest queries answered, want 20", answered)
	}
}

func BenchmarkDecodeAtCap(b *testing.B) {
	b.SetBytes(int64(len(atCap)))
	b.ReportAllocs()
	for b.Loop() {
		_, a, err := decodeAnswer(bytes.NewReader(atCap))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.toResult(); err != nil {
			b.Fatal(err)
		}
	}
}

// oneStringAtCap is an answer of MaxResponseBytes that passes once read:
// a scalar, then one string in a key the decoder skips, which it must
// hold whole. Per byte, the shape that costs the most to decode.
var oneStringAtCap = func() []byte {
	head := `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.001"]},"pad":"`
	tail := `"}`
	return []byte(head + strings.Repeat("x", MaxResponseBytes-len(head)-len(tail)) + tail)
}()

// BenchmarkQueriesAtTheCap runs 160 queries at once (16 Rollout workers, 10
// metrics each), every answer at the cap, of either shape, with the
// default budget and without one, and reports the peak heap and the
// budget's peak.
func BenchmarkQueriesAtTheCap(b *testing.B) {
	for _, shape := range []struct {
		name string
		body []byte
	}{{"many_series", atCap}, {"one_string", oneStringAtCap}} {
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(shape.body)
		}))
		for _, tc := range []struct {
			name   string
			budget func() *Budget
		}{
			{"budget", func() *Budget { return NewBudget(DefaultBudget) }},
			{"no_budget", func() *Budget { return nil }},
		} {
			b.Run(shape.name+"/"+tc.name, func(b *testing.B) {
				var peakHeap, peakBudget int64
				for b.Loop() {
					budget := tc.budget()
					runtime.GC()
					stop := sampleHeapObjects()
					var wg sync.WaitGroup
					for range 160 {
						wg.Go(func() {
							p, err := New(Config{Address: server.URL, Budget: budget})
							if err != nil {
								b.Error(err)
								return
							}
							defer p.CloseIdleConnections()
							_, _ = p.Query(context.Background(), "up")
						})
					}
					wg.Wait()
					peakHeap = max(peakHeap, stop())
					peakBudget = max(peakBudget, budget.Peak())
				}
				b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(peakBudget)/(1<<20), "budget-peak-MiB")
			})
		}
		server.Close()
	}
}

// sampleHeapObjects records the heap's objects every millisecond until the
// returned function is called, which returns the most seen.
func sampleHeapObjects() func() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak int64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			metrics.Read(sample)
			peak = max(peak, int64(sample[0].Value.Uint64()))
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak
	}
}
