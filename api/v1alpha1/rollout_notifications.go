package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NotificationFormat is the body a webhook receives.
// +kubebuilder:validation:Enum=JSON;Slack
type NotificationFormat string

const (
	// NotificationJSON posts the transition as a JSON object (see
	// docs/notifications.md for its fields).
	NotificationJSON NotificationFormat = "JSON"
	// NotificationSlack posts {"text": "..."}, which Slack incoming
	// webhooks and compatible receivers (Mattermost, Rocket.Chat, Teams
	// workflows) show as a message.
	NotificationSlack NotificationFormat = "Slack"
)

// Notification is a webhook posted to when the Rollout's phase changes.
type Notification struct {
	// Name identifies the webhook in Events.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.notifications[].name must be lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`
	// URLSecretRef names the key of a Secret in the Rollout's namespace
	// that holds the webhook's http or https URL. A Secret, because chat
	// webhook URLs carry their credentials in the path. It is read at each
	// delivery.
	URLSecretRef WebhookSecretKeyReference `json:"urlSecretRef"`
	// Format of the body: JSON (default) or Slack.
	// +optional
	// +kubebuilder:default=JSON
	Format NotificationFormat `json:"format,omitempty"`
	// Phases are the phases whose start is posted; all of Progressing,
	// Paused, Aborted and Healthy when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	Phases []RolloutPhase `json:"phases,omitempty"`
}

// WebhookSecretKeyReference names one key of a Secret in the Rollout's
// namespace.
type WebhookSecretKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="spec.notifications[].urlSecretRef.key must be a valid Secret key"
	Key string `json:"key"`
}

// Wants reports whether the webhook posts the start of phase.
func (n *Notification) Wants(phase RolloutPhase) bool {
	if len(n.Phases) == 0 {
		return true
	}
	for _, p := range n.Phases {
		if p == phase {
			return true
		}
	}
	return false
}

// NotificationStatus is the last phase transition decided for the webhooks.
// It is written, in the same status write as the phase, before anything is
// posted: a transition recorded here is never posted again, by this
// manager or the next (at most once, docs/notifications.md).
type NotificationStatus struct {
	// Phase is the phase whose start was last decided: posted to the
	// webhooks that want it, or, for the first phase seen after
	// spec.notifications was set, only recorded.
	Phase RolloutPhase `json:"phase"`
	// PreviousPhase is the phase it followed; empty for the first one.
	// +optional
	PreviousPhase RolloutPhase `json:"previousPhase,omitempty"`
	// Sequence counts the transitions decided; with the Rollout's UID it
	// makes the id of each message, which a receiver may use to drop a
	// duplicate.
	// +optional
	Sequence int64 `json:"sequence,omitempty"`
	// TransitionTime is when the transition was decided.
	TransitionTime metav1.Time `json:"transitionTime"`
}
