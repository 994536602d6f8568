package notification

import (
	"encoding/json"
	"testing"
)

// TestSlackTextIsEscaped: what a Rollout's status carries reaches Slack as
// text, never as a mention, a channel-wide notification or a link.
func TestSlackTextIsEscaped(t *testing.T) {
	cases := []struct {
		name string
		m    Message
		want string
	}{
		{"a channel-wide mention",
			Message{Namespace: "shop", Rollout: "web", Phase: "Aborted", Reason: "AnalysisFailed", Message: "<!channel> look"},
			"Rollout shop/web is Aborted: AnalysisFailed. &lt;!channel&gt; look"},
		{"a link shown as other text",
			Message{Namespace: "shop", Rollout: "web", Phase: "Aborted", Message: "see <https://evil.example/login|the runbook>"},
			"Rollout shop/web is Aborted. see &lt;https://evil.example/login|the runbook&gt;"},
		{"a user mention",
			Message{Namespace: "shop", Rollout: "web", Phase: "Paused", Message: "<@U024BE7LH> <#C024BE7LR> <!subteam^SAZ94GDB8>"},
			"Rollout shop/web is Paused. &lt;@U024BE7LH&gt; &lt;#C024BE7LR&gt; &lt;!subteam^SAZ94GDB8&gt;"},
		{"an entity is not decoded",
			Message{Namespace: "shop", Rollout: "web", Phase: "Aborted", Message: "&lt;!here&gt; & rate > 0.01 < 1"},
			"Rollout shop/web is Aborted. &amp;lt;!here&amp;gt; &amp; rate &gt; 0.01 &lt; 1"},
		{"revisions and reason too",
			Message{Namespace: "shop", Rollout: "web", Phase: "Healthy", Reason: "A<b>", CanaryRevision: "c&d", StableRevision: "<s>"},
			"Rollout shop/web is Healthy: A&lt;b&gt; (canary c&amp;d, stable &lt;s&gt;)"},
		{"plain text is unchanged",
			Message{Namespace: "shop", Rollout: "web", Phase: "Aborted", PreviousPhase: "Progressing", Message: "error-rate 0.2 above 0.01"},
			"Rollout shop/web is Aborted (was Progressing). error-rate 0.2 above 0.01"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SlackText(c.m); got != c.want {
				t.Errorf("SlackText = %q\nwant        %q", got, c.want)
			}
			// The body carries the escaped text, whatever JSON does with
			// < > & on the wire.
			b, err := Body("Slack", c.m)
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Text string }
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			if body.Text != c.want {
				t.Errorf("Slack body text = %q\nwant             %q", body.Text, c.want)
			}
		})
	}
}
