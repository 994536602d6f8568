package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"web:1.2.3":                          "1.2.3",
		"registry.example.com/web:v2.0.0":    "v2.0.0",
		"registry.example.com:5000/web:1.0":  "1.0",
		"registry.example.com:5000/web":      "",
		"web":                                "",
		"web:1.2.3@sha256:0123456789abcdef":  "1.2.3",
		"web@sha256:0123456789abcdef":        "",
		"ghcr.io/org/team/web:1.2.3-rc.1":    "1.2.3-rc.1",
		"localhost:5000/org/web:2026.01.02":  "2026.01.02",
		"registry.example.com/web:latest":    "latest",
		"registry.example.com/web:":          "",
		"registry.example.com:5000/web:sha1": "sha1",
	} {
		if got := ImageTag(image); got != want {
			t.Errorf("ImageTag(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestCeilSecond(t *testing.T) {
	whole := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := CeilSecond(whole); !got.Equal(whole) {
		t.Errorf("CeilSecond(whole) = %v", got)
	}
	if got := CeilSecond(whole.Add(time.Millisecond)); !got.Equal(whole.Add(time.Second)) {
		t.Errorf("CeilSecond(+1ms) = %v", got)
	}
}

func TestStatusTime(t *testing.T) {
	if got := StatusTime(time.Time{}); got != nil {
		t.Errorf("StatusTime(zero) = %v, want nil", got)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 900_000_000, time.UTC)
	if got := StatusTime(at); got == nil || !got.Equal(&metav1.Time{Time: at.Truncate(time.Second)}) {
		t.Errorf("StatusTime(%v) = %v, want the whole second", at, got)
	}
}
