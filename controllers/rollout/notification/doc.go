// Package notification posts a Rollout's phase transitions to webhooks:
// the bodies (generic JSON, Slack-compatible), and one delivery with a
// timeout per attempt, a few retries for what the receiver cannot have
// acted on, no redirects followed and the address judged by an allow-list
// before any connection. Deciding what to post, and recording it, is the
// Rollout controller's (controllers/rollout, rollout_notify.go).
package notification
