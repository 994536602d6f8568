package notification

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Message is one phase transition of a Rollout, as posted.
type Message struct {
	// ID is unique per transition: the Rollout's UID and the transition's
	// sequence number. Retries of one delivery carry the same ID, so a
	// receiver may drop a duplicate.
	ID            string `json:"id"`
	Namespace     string `json:"namespace"`
	Rollout       string `json:"rollout"`
	Phase         string `json:"phase"`
	PreviousPhase string `json:"previousPhase,omitempty"`
	// Reason and Message are the Rollout's status.reason and status.message
	// when the transition was decided.
	Reason         string `json:"reason,omitempty"`
	Message        string `json:"message,omitempty"`
	StableRevision string `json:"stableRevision,omitempty"`
	CanaryRevision string `json:"canaryRevision,omitempty"`
	// Step is the index of the step in progress, if any; Steps their count.
	Step  *int32    `json:"step,omitempty"`
	Steps int       `json:"steps"`
	Time  time.Time `json:"time"`
}

// Body renders m in format; the empty format is JSON.
func Body(format stepwisev1.NotificationFormat, m Message) ([]byte, error) {
	var v any
	switch format {
	case "", stepwisev1.NotificationJSON:
		v = m
	case stepwisev1.NotificationSlack:
		v = struct {
			Text string `json:"text"`
		}{Text: SlackText(m)}
	default:
		return nil, fmt.Errorf("format %q is not JSON or Slack", format)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s body: %w", format, err)
	}
	return b, nil
}

// slackEscaper escapes the three characters Slack reads as control
// sequences in a message's text, and only those, as Slack's formatting
// rules ask: & first, so that the entities it writes are not escaped again.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackText is the one message a chat shows: what changed, why, and where
// the Rollout stands. It is escaped for Slack: the Rollout's message holds
// text from whoever writes the Rollout and from the Prometheus it queries,
// and, unescaped, <!channel>, <@U123> or <https://x|click here> in it would
// notify a whole channel, ping someone or show a link as other text.
func SlackText(m Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Rollout %s/%s is %s", m.Namespace, m.Rollout, m.Phase)
	if m.PreviousPhase != "" {
		fmt.Fprintf(&b, " (was %s)", m.PreviousPhase)
	}
	if m.Reason != "" {
		fmt.Fprintf(&b, ": %s", m.Reason)
	}
	if m.Message != "" {
		fmt.Fprintf(&b, ". %s", m.Message)
	}
	var where []string
	if m.Step != nil && m.Steps > 0 {
		where = append(where, fmt.Sprintf("step %d/%d", *m.Step+1, m.Steps))
	}
	if m.CanaryRevision != "" {
		where = append(where, "canary "+m.CanaryRevision)
	}
	if m.StableRevision != "" {
		where = append(where, "stable "+m.StableRevision)
	}
	if len(where) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(where, ", "))
	}
	return slackEscaper.Replace(b.String())
}
