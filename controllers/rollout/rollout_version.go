package rollout

import (
	"fmt"

	"github.com/Masterminds/semver/v3"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// versionCheck is spec.versionPolicy applied to the update revision's image
// and, for downgrades, the stable revision's.
type versionCheck struct {
	// Violation says why the update revision breaks the policy; empty when
	// it does not.
	Violation string
	// Downgrade is true when both tags are versions, the update's is lower,
	// and the downgrade is trusted: the update revision was stable before,
	// or its version meets trustedDowngrades. It takes the fast path.
	Downgrade bool
	// Untrusted says why a lower version is not trusted, so that it takes
	// the steps; empty otherwise.
	Untrusted string
	// Invalid says why trustedDowngrades cannot be read; the Rollout is
	// stalled until the spec is fixed.
	Invalid string
}

// checkVersion is pure: images by container name in, verdict out. A nil
// stable map means the stable revision's images are unknown (pruned), in
// which case no downgrade is detected and the revision takes the steps,
// the side that is checked by analysis. wasStable says whether the update
// revision is one of status.previousStableRevisions.
//
// A lower version alone is no reason to skip the analysis: a hotfix build
// 1.4.0-hotfix.1 is lower than 1.4.0 in semver, yet it is new code. Only a
// revision that already ran as stable here, or a version that
// trustedDowngrades names, is trusted.
func checkVersion(policy *v1alpha1.VersionPolicy, updateRevision string, update, stable map[string]string, wasStable bool) versionCheck {
	if policy == nil {
		return versionCheck{}
	}
	var trusted *semver.Constraints
	if policy.TrustedDowngrades != "" {
		c, err := semver.NewConstraint(policy.TrustedDowngrades)
		if err != nil {
			return versionCheck{Invalid: fmt.Sprintf("spec.versionPolicy.trustedDowngrades %q does not parse: %v", policy.TrustedDowngrades, err)}
		}
		trusted = c
	}
	image, ok := update[policy.Container]
	if !ok {
		return versionCheck{Violation: fmt.Sprintf("revision %s has no container %q", updateRevision, policy.Container)}
	}
	v, problem := versionOf(image)
	if problem != "" {
		return versionCheck{Violation: fmt.Sprintf("container %q: %s", policy.Container, problem)}
	}
	if policy.Constraint != "" {
		c, err := semver.NewConstraint(policy.Constraint)
		if err != nil {
			return versionCheck{Violation: fmt.Sprintf("constraint %q does not parse: %v", policy.Constraint, err)}
		}
		if !c.Check(v) {
			return versionCheck{Violation: fmt.Sprintf("container %q runs version %s, outside constraint %q", policy.Container, v.Original(), policy.Constraint)}
		}
	}
	stableImage, ok := stable[policy.Container]
	if !ok {
		return versionCheck{}
	}
	sv, problem := versionOf(stableImage)
	if problem != "" || !v.LessThan(sv) {
		return versionCheck{}
	}
	switch {
	case wasStable:
		return versionCheck{Downgrade: true}
	case trusted != nil && trusted.Check(v):
		return versionCheck{Downgrade: true}
	case trusted != nil:
		return versionCheck{Untrusted: fmt.Sprintf("version %s is lower than stable %s, but revision %s was never stable here and %s does not meet spec.versionPolicy.trustedDowngrades %q, so it takes the steps",
			v.Original(), sv.Original(), updateRevision, v.Original(), policy.TrustedDowngrades)}
	}
	return versionCheck{Untrusted: fmt.Sprintf("version %s is lower than stable %s, but revision %s was never stable here, so it takes the steps",
		v.Original(), sv.Original(), updateRevision)}
}

// versionOf reads an image's tag as a semantic version; problem says why it
// cannot.
func versionOf(image string) (*semver.Version, string) {
	tag := v1alpha1.ImageTag(image)
	if tag == "" {
		return nil, fmt.Sprintf("image %q has no tag to read a version from", image)
	}
	v, err := semver.NewVersion(tag)
	if err != nil {
		return nil, fmt.Sprintf("tag %q of image %q is not a semantic version", tag, image)
	}
	return v, ""
}
