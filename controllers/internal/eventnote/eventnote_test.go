package eventnote

import (
	"fmt"
	"strings"
	"testing"
)

// longName is as long as a Pod name may be: 63 characters.
func longName(i int) string { return fmt.Sprintf("%s-%05d", strings.Repeat("w", 57), i) }

func longNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = longName(i)
	}
	return names
}

func TestListNamesThemAllOrCountsTheRest(t *testing.T) {
	if got, want := List([]string{"web-a"}), "web-a"; got != want {
		t.Errorf("List(one) = %q, want %q", got, want)
	}
	if got, want := List([]string{"web-c", "web-a", "web-b"}), "web-c, web-a, web-b"; got != want {
		t.Errorf("List(three) = %q, want %q", got, want)
	}

	got := List(longNames(20))
	listed := strings.Count(got, strings.Repeat("w", 57))
	if listed == 0 || listed == 20 {
		t.Fatalf("List(20 long names) lists %d of them, want some cut: %q", listed, got)
	}
	if want := fmt.Sprintf(", and %d more", 20-listed); !strings.HasSuffix(got, want) {
		t.Errorf("List(20 long names) = %q, want it to end %q", got, want)
	}
	if !strings.HasPrefix(got, longName(0)+", "+longName(1)+", ") {
		t.Errorf("List(20 long names) = %q, want the names in their order", got)
	}
	if len(got) > maxNamesBytes+len(", and 99 more") {
		t.Errorf("List(20 long names) is %d bytes, want at most %d", len(got), maxNamesBytes+len(", and 99 more"))
	}
}

func TestJoinStaysUnderTheAPIsLimit(t *testing.T) {
	if got, want := Join("", "deleted pod a"), "deleted pod a"; got != want {
		t.Errorf("Join(empty, x) = %q, want %q", got, want)
	}
	if got, want := Join("updated pod a", "updated pod b"), "updated pod a; updated pod b"; got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
	first := "updating 20 pods (" + List(longNames(20)) + ") in place to revision web-2"
	second := "updating 20 pods (" + List(longNames(20)) + ") in place to revision web-1"
	got := Join(first, second)
	if len(got) != MaxBytes || !strings.HasSuffix(got, " ...") || !strings.HasPrefix(got, first+"; ") {
		t.Errorf("Join of two full notes is %d bytes, want %d: the first whole, then the second cut with \" ...\": %q", len(got), MaxBytes, got)
	}
}
