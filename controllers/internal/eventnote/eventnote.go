// Package eventnote writes Event notes that name several objects, one
// Event for what a round did to many Pods instead of one Event per Pod,
// and keeps them under the 1 KB the API server allows a note.
//
// One Event per object tells less than it seems: the events.k8s.io
// recorder folds Events that share a reason and a regarding object
// (resourceVersion included) into a series whose note is the first one's,
// so the objects after the first of a round are only a count.
package eventnote

import (
	"fmt"
	"strings"
)

// MaxBytes is below the 1 KB the API server allows an Event's note.
const MaxBytes = 1000

// maxNamesBytes bounds the names one list gives, so that a note holding a
// list of 63-character names, and words around it, stays under MaxBytes.
const maxNamesBytes = 600

// List joins names with ", ", and past maxNamesBytes of names ends with
// "and N more", so the count is always whole even when the list is not.
func List(names []string) string {
	var list strings.Builder
	listed := 0
	for _, name := range names {
		if listed > 0 && list.Len()+len(name) > maxNamesBytes {
			break
		}
		if listed > 0 {
			list.WriteString(", ")
		}
		list.WriteString(name)
		listed++
	}
	if rest := len(names) - listed; rest > 0 {
		fmt.Fprintf(&list, ", and %d more", rest)
	}
	return list.String()
}

// Join appends next to note, "; " between them, cut short with " ..." past
// MaxBytes: the notes are ASCII (object names, our own words), so a byte
// cut is a character cut.
func Join(note, next string) string {
	if note == "" {
		return next
	}
	joined := note + "; " + next
	if len(joined) <= MaxBytes {
		return joined
	}
	return joined[:MaxBytes-len(" ...")] + " ..."
}
