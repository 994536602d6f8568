package v1alpha1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusTime is t as a status field holds it: whole seconds (metav1.Time
// encodes RFC 3339), nil for the zero time.
func StatusTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t).Rfc3339Copy()
	return &mt
}

// CeilSecond rounds t up to a whole second, so that a time a status field
// holds (whole seconds) is never earlier than meant.
func CeilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// ImageTag is the tag of an image reference, "" when it has none: the part
// after the last colon of the last path element, before any digest, so
// that a registry's port (host:5000/app) is not taken for a tag. It is the
// version spec.versionPolicy reads.
func ImageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndexByte(image, '/')
	if colon := strings.LastIndexByte(image, ':'); colon > slash {
		return image[colon+1:]
	}
	return ""
}
