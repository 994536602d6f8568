package cloneset

import (
	"fmt"
	"strings"
	"testing"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/internal/eventnote"
)

func TestPodActionsTellEachKindOfActionOnce(t *testing.T) {
	longName := func(i int) string { return fmt.Sprintf("%s-%05d", strings.Repeat("w", 57), i) } // 63 characters
	tests := []struct {
		name  string
		add   func(a *podActions)
		want  []podEvent
		check func(t *testing.T, got []podEvent)
	}{{
		name: "nothing done, nothing told",
		add:  func(*podActions) {},
		want: []podEvent{},
	}, {
		name: "one Pod reads as before",
		add: func(a *podActions) {
			a.add(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", "web-a", " in place to revision web-2")
		},
		want: []podEvent{{stepwisev1.EventSuccessfulUpdatePodInPlace, "updating pod web-a in place to revision web-2"}},
	}, {
		name: "a round's actions in one Event per reason, in the order taken",
		add: func(a *podActions) {
			a.add(stepwisev1.EventSuccessfulCreate, "created ", "web-n", " on revision web-2")
			a.add(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", "web-c", " in place to revision web-2")
			a.add(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", "web-a", " in place to revision web-2")
			a.add(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", "web-z", " in place to revision web-1")
			a.add(stepwisev1.EventSuccessfulDelete, "deleted ", "web-x", ": scale down")
			a.add(stepwisev1.EventSuccessfulDelete, "deleted ", "web-y", ": listed in scaleStrategy.podsToDelete")
			a.add(stepwisev1.EventSuccessfulDelete, "deleted ", "web-w", ": scale down")
		},
		want: []podEvent{
			{stepwisev1.EventSuccessfulCreate, "created pod web-n on revision web-2"},
			{stepwisev1.EventSuccessfulUpdatePodInPlace, "updating 2 pods (web-c, web-a) in place to revision web-2; updating pod web-z in place to revision web-1"},
			{stepwisev1.EventSuccessfulDelete, "deleted 2 pods (web-x, web-w): scale down; deleted pod web-y: listed in scaleStrategy.podsToDelete"},
		},
	}, {
		name: "a full round of the longest names stays under the note's 1 KB and keeps the count whole",
		add: func(a *podActions) {
			for i := range maxPodsWrittenPerRound {
				a.add(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", longName(i), " in place to revision web-7c9d8f6b54")
			}
		},
		check: func(t *testing.T, got []podEvent) {
			if len(got) != 1 {
				t.Fatalf("got %d events, want 1", len(got))
			}
			note := got[0].note
			if len(note) >= 1024 {
				t.Errorf("note is %d bytes, the API server takes under 1024: %q", len(note), note)
			}
			wantStart := fmt.Sprintf("updating %d pods (%s, ", maxPodsWrittenPerRound, longName(0))
			if !strings.HasPrefix(note, wantStart) {
				t.Errorf("note %q does not start with %q", note, wantStart)
			}
			listed := strings.Count(note, strings.Repeat("w", 57))
			wantEnd := fmt.Sprintf(", and %d more) in place to revision web-7c9d8f6b54", maxPodsWrittenPerRound-listed)
			if listed == 0 || listed == maxPodsWrittenPerRound || !strings.HasSuffix(note, wantEnd) {
				t.Errorf("note %q lists %d names, want some cut and %q at its end", note, listed, wantEnd)
			}
		},
	}, {
		name: "two full groups of one reason share a note that stays under 1 KB",
		add: func(a *podActions) {
			for i := range maxPodsWrittenPerRound {
				a.add(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", longName(i), " in place to revision web-2")
				a.add(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", longName(100+i), " in place to revision web-1")
			}
		},
		check: func(t *testing.T, got []podEvent) {
			if len(got) != 1 || len(got[0].note) > eventnote.MaxBytes || !strings.HasSuffix(got[0].note, " ...") {
				t.Errorf("got %d events, first note %d bytes, want 1 of at most %d ending in \" ...\": %v", len(got), len(got[0].note), eventnote.MaxBytes, got)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var actions podActions
			tt.add(&actions)
			got := actions.events()
			if tt.check != nil {
				tt.check(t, got)
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || len(got) != len(tt.want) {
				t.Errorf("events:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}
