package main

import (
	"net/http"
	"testing"
)

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		bad  bool
		want int // 500s among 100 requests
	}{{false, 0}, {true, 20}} {
		fails := 0
		for n := uint64(1); n <= 100; n++ {
			if code(tc.bad, n) == http.StatusInternalServerError {
				fails++
			}
		}
		if fails != tc.want {
			t.Errorf("bad=%v: %d of 100 failed, want %d", tc.bad, fails, tc.want)
		}
	}
}

func TestFirstInstance(t *testing.T) {
	dir := t.TempDir()
	first, err := firstInstance(dir, "aaa")
	if err != nil || first != "aaa" {
		t.Fatalf("first run: %q, %v; want aaa", first, err)
	}
	again, err := firstInstance(dir, "bbb")
	if err != nil || again != "aaa" {
		t.Fatalf("a later process over the same directory: %q, %v; want aaa", again, err)
	}
}
