package analysis

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestLookback(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		query   string
		want    time.Duration
		wantErr string
	}{
		{"no selector", `vector(1)`, 0, ""},
		{"instant selector reads the newest sample", `up{job="x"}`, 0, ""},
		{"instant selector with an offset", `up offset 5m`, 5 * time.Minute, ""},
		{"range", `rate(x[1m])`, time.Minute, ""},
		{"longest of several ranges", `sum(rate(a[30s])) / sum(rate(b[5m])) > 0 and on() count_over_time(c[2m]) > 1`, 5 * time.Minute, ""},
		{"range plus offset", `rate(x[1m] offset 30s)`, 90 * time.Second, ""},
		{"negative offset reads forward", `rate(x[1m] offset -30s)`, 30 * time.Second, ""},
		{"subquery range around an inner range", `max_over_time(rate(x[1m])[10m:30s])`, 11 * time.Minute, ""},
		{"subquery offsets add up", `max_over_time(rate(x[1m] offset 1m)[10m:] offset 2m)`, 14 * time.Minute, ""},
		{"nested subqueries", `max_over_time(min_over_time(rate(x[1m])[5m:])[10m:])`, 16 * time.Minute, ""},
		{"@ a time before now reaches back to it", `x @ 1764582600`, now.Sub(time.Unix(1764582600, 0)), ""},
		{"@ start() is the evaluation time of an instant query", `rate(x[2m] @ start())`, 2 * time.Minute, ""},
		{"@ in the future reads nothing before now", `x @ 4102444800`, 0, ""},
		{"milliseconds", `rate(x[1500ms])`, 1500 * time.Millisecond, ""},
		{"not PromQL", `rate(x[1m]) default 0`, 0, "parse PromQL"},
		{"empty range is refused by PromQL", `rate(x[0s])`, 0, "parse PromQL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lookback(tt.query, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Lookback(%q) = %s, %v; want %s", tt.query, got, err, tt.want)
			}
		})
	}
}

func TestCanaryAge(t *testing.T) {
	ready := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		after time.Duration
		want  string
	}{
		{-5 * time.Second, "1s"},
		{0, "1s"},
		{1900 * time.Millisecond, "1s"},
		{90*time.Second + 999*time.Millisecond, "1m30s"},
		{10 * time.Minute, "10m"},
		{3 * time.Hour, "10m"},
	} {
		if got := CanaryAge(ready, ready.Add(tt.after)); got != tt.want {
			t.Errorf("CanaryAge after %s = %s, want %s", tt.after, got, tt.want)
		}
	}
}

func TestCheckWindow(t *testing.T) {
	ready := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := ready.Add(65*time.Second + 400*time.Millisecond)
	for _, tt := range []struct {
		query   string
		problem string
	}{
		{`rate(x[1m])`, ""},
		{`rate(x[1m5s])`, ""},
		{`rate(x[1m6s])`, "reads 1m6s back but the canary has been ready for 1m5s only"},
		{`rate(x[30s] offset 1m)`, "reads 1m30s back"},
		{fmt.Sprintf("x @ %d", ready.Add(-10*time.Minute).Unix()), "reads 11m5s400ms back"},
		{`rate(x[1m]`, "parse PromQL"},
	} {
		got := CheckWindow(tt.query, ready, now)
		if tt.problem == "" && got.Problem != "" || !strings.Contains(got.Problem, tt.problem) {
			t.Errorf("CheckWindow(%q) problem %q, want %q", tt.query, got.Problem, tt.problem)
		}
	}
}
