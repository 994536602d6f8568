// Package compare holds the pure parts of the side-by-side benchmark
// (test/bench, make bench-compare): counting each controller's writes in the
// API server's audit log, following Pods ready on the new image over time,
// and printing the table and the SVG chart. No cluster is needed to test it.
package compare

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteKey names one kind of write: resource (with its API group and
// subresource), verb, and whether it was refused with 409 Conflict.
type WriteKey struct {
	Resource string // "pods", "pods/status", "clonesets.apps.kruise.io", ...
	Verb     string // create, update, patch, delete
	Conflict bool   // answered 409
}

func (k WriteKey) String() string {
	s := k.Resource + " " + k.Verb
	if k.Conflict {
		s += " (409)"
	}
	return s
}

// Writes counts one client's writes by kind.
type Writes map[WriteKey]int

// Total is the number of writes; conflicts counts only the 409s.
func (w Writes) Total() (total, conflicts int) {
	for k, n := range w {
		total += n
		if k.Conflict {
			conflicts += n
		}
	}
	return total, conflicts
}

// Sorted lists the kinds, most frequent first.
func (w Writes) Sorted() []WriteKey {
	keys := make([]WriteKey, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if w[keys[i]] != w[keys[j]] {
			return w[keys[i]] > w[keys[j]]
		}
		return keys[i].String() < keys[j].String()
	})
	return keys
}

// auditEvent is the part of an audit.k8s.io/v1 Event that CountWrites and
// WriteTimes need.
type auditEvent struct {
	Stage                    string    `json:"stage"`
	Verb                     string    `json:"verb"`
	UserAgent                string    `json:"userAgent"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	ObjectRef                *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// resource is the written resource as WriteKey spells it.
func (ev *auditEvent) resource() string {
	res := ev.ObjectRef.Resource
	if ev.ObjectRef.APIGroup != "" {
		res += "." + ev.ObjectRef.APIGroup
	}
	if ev.ObjectRef.Subresource != "" {
		res += "/" + ev.ObjectRef.Subresource
	}
	return res
}

// conflict tells a write answered 409 Conflict.
func (ev *auditEvent) conflict() bool {
	return ev.ResponseStatus != nil && ev.ResponseStatus.Code == 409
}

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// CountWrites reads an audit log (JSON lines) and counts the writes whose
// user agent starts with agentPrefix and that completed in [from, to].
// Reads, other clients, and writes outside the window are skipped; a line
// that is not an audit event is an error (the log is ours, so it means the
// format changed).
func CountWrites(r io.Reader, agentPrefix string, from, to time.Time) (Writes, error) {
	w := Writes{}
	err := eachWrite(r, agentPrefix, from, to, func(ev *auditEvent) {
		w[WriteKey{Resource: ev.resource(), Verb: ev.Verb, Conflict: ev.conflict()}]++
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// WrittenObject names one object by the resource written (as WriteKey
// spells it, "clonesets.stepwise.dev/status") and its namespace and name.
type WrittenObject struct {
	Resource, Namespace, Name string
}

// WriteTime is when the API server received one write and when it answered.
type WriteTime struct {
	Received, Completed time.Time
}

// WriteTimes reads an audit log as CountWrites does and lists, for each
// object of the given resources, the times of the writes that succeeded,
// in the log's order (the order they completed). A refused write (409,
// or any other error) changed nothing a watch could see, so it is left out.
func WriteTimes(r io.Reader, agentPrefix string, resources []string, from, to time.Time) (map[WrittenObject][]WriteTime, error) {
	wanted := map[string]bool{}
	for _, res := range resources {
		wanted[res] = true
	}
	out := map[WrittenObject][]WriteTime{}
	err := eachWrite(r, agentPrefix, from, to, func(ev *auditEvent) {
		res := ev.resource()
		if !wanted[res] || (ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 300) {
			return
		}
		obj := WrittenObject{Resource: res, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}
		out[obj] = append(out[obj], WriteTime{Received: ev.RequestReceivedTimestamp, Completed: ev.StageTimestamp})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Split divides the time from a cause (from) to a watch event that shows
// the write's result (seen) into the writer's part (from until the API
// server received the write), the API server's (received to answered) and
// the watch's (answered to seen). The writer's part is negative when it
// saw the cause before the one who timed it did.
func (w WriteTime) Split(from, seen time.Time) (writer, server, watch time.Duration) {
	return w.Received.Sub(from), w.Completed.Sub(w.Received), seen.Sub(w.Completed)
}

// LastWrite is the last of writes (in the order they completed) that
// completed in [from, to]: the write whose result a watch event seen at
// to carried, when nothing newer came in between.
func LastWrite(writes []WriteTime, from, to time.Time) (WriteTime, bool) {
	for i := len(writes) - 1; i >= 0; i-- {
		w := writes[i]
		if w.Completed.After(to) {
			continue
		}
		if w.Completed.Before(from) {
			break
		}
		return w, true
	}
	return WriteTime{}, false
}

// eachWrite calls f with each completed write in an audit log by a user
// agent starting with agentPrefix that completed in [from, to].
func eachWrite(r io.Reader, agentPrefix string, from, to time.Time, f func(ev *auditEvent)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("audit log line %d: %w", line, err)
		}
		if ev.Stage != "ResponseComplete" || !writeVerbs[ev.Verb] || ev.ObjectRef == nil ||
			!strings.HasPrefix(ev.UserAgent, agentPrefix) ||
			ev.StageTimestamp.Before(from) || ev.StageTimestamp.After(to) {
			continue
		}
		f(&ev)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading audit log: %w", err)
	}
	return nil
}

// UserAgents lists the distinct user agents of the log's writes with their
// counts, for checking that every writer is attributed to someone.
func UserAgents(r io.Reader) (map[string]int, error) {
	agents := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue
		}
		if ev.Stage == "ResponseComplete" && writeVerbs[ev.Verb] {
			agent, _, _ := strings.Cut(ev.UserAgent, " ")
			agents[agent]++
		}
	}
	return agents, sc.Err()
}

// AuditPolicy records every completed write at Metadata level and nothing
// else: reads and Lease renewals (leader election, node heartbeats) are not
// work done for the Pods.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  verbs: ["get", "list", "watch"]
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: Metadata
`
