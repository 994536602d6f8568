package cli

import (
	"strings"
	"testing"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestParseImages(t *testing.T) {
	got, err := ParseImages([]string{"app=registry.example.com/web:1.2.0", "log=registry.example.com:5000/log@sha256:abc"})
	if err != nil || len(got) != 2 || got[0] != (ImageChange{Container: "app", To: "registry.example.com/web:1.2.0"}) ||
		got[1].Container != "log" || got[1].To != "registry.example.com:5000/log@sha256:abc" {
		t.Fatalf("ParseImages = %+v, %v", got, err)
	}
	for args, want := range map[string]string{
		"":                    "at least one CONTAINER=IMAGE is required",
		"app":                 `"app" is not CONTAINER=IMAGE`,
		"=web:1":              `"=web:1" names no container`,
		"app=":                `"app=": "" is not an image reference`,
		"app=web 1":           `"app=web 1": "web 1" is not an image reference`,
		"app=web:1|app=web:2": `container "app" is named twice`,
	} {
		var list []string
		if args != "" {
			list = strings.Split(args, "|")
		}
		if _, err := ParseImages(list); err == nil || err.Error() != want {
			t.Errorf("ParseImages(%q) = %v, want %q", args, err, want)
		}
	}
}

func TestUndoTarget(t *testing.T) {
	st := func(stable string, previous ...string) *stepwisev1.RolloutStatus {
		return &stepwisev1.RolloutStatus{StableRevision: stable, PreviousStableRevisions: previous}
	}
	for name, c := range map[string]struct {
		status         *stepwisev1.RolloutStatus
		update         string
		want           string
		stable         bool
		wantErrContain string
	}{
		"mid rollout: back to stable":           {st("web-1", "web-0"), "web-2", "web-1", true, ""},
		"aborted: back to stable":               {st("web-1"), "web-2", "web-1", true, ""},
		"at stable: the one stable before":      {st("web-2", "web-1", "web-0"), "web-2", "web-1", false, ""},
		"at stable, no history":                 {st("web-2"), "web-2", "", false, "runs its stable revision web-2 and no earlier revision was stable"},
		"new rollout without a stable revision": {st(""), "web-2", "", false, "no stable revision yet"},
	} {
		t.Run(name, func(t *testing.T) {
			got, stable, err := UndoTarget(c.status, c.update)
			switch {
			case c.wantErrContain != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErrContain) {
					t.Errorf("err = %v, want it to say %q", err, c.wantErrContain)
				}
			case err != nil || got != c.want || stable != c.stable:
				t.Errorf("UndoTarget = %q, %v, %v; want %q, %v", got, stable, err, c.want, c.stable)
			}
		})
	}
}
