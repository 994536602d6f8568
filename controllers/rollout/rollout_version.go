package rollout

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// versionCheck is spec.versionPolicy applied to the update revision's image
// and, for downgrades, the stable revision's.
type versionCheck struct {
	// Violation says why the update revision breaks the policy; empty when
	// it does not.
	Violation string
	// Downgrade is true when both tags are versions and the update's is lower.
	Downgrade bool
}

// checkVersion is pure: images by container name in, verdict out. A nil
// stable map means the stable revision's images are unknown (pruned), in
// which case no downgrade is detected and the revision takes the steps,
// the side that is checked by analysis.
func checkVersion(policy *v1alpha1.VersionPolicy, updateRevision string, update, stable map[string]string) versionCheck {
	if policy == nil {
		return versionCheck{}
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
	if stableImage, ok := stable[policy.Container]; ok {
		if sv, problem := versionOf(stableImage); problem == "" && v.LessThan(sv) {
			return versionCheck{Downgrade: true}
		}
	}
	return versionCheck{}
}

// versionOf reads an image's tag as a semantic version; problem says why it
// cannot.
func versionOf(image string) (*semver.Version, string) {
	tag := imageTag(image)
	if tag == "" {
		return nil, fmt.Sprintf("image %q has no tag to read a version from", image)
	}
	v, err := semver.NewVersion(tag)
	if err != nil {
		return nil, fmt.Sprintf("tag %q of image %q is not a semantic version", tag, image)
	}
	return v, ""
}

// imageTag returns the tag of an image reference ("" when none): the part
// after the last colon of the last path element, before any digest, so that
// a registry port (host:5000/app) is not taken for a tag.
func imageTag(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndexByte(image, '/')
	colon := strings.LastIndexByte(image, ':')
	if colon <= slash {
		return ""
	}
	return image[colon+1:]
}
