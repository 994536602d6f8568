package version

import "testing"

func TestStringPrefersTheStampedVersion(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.8.7"
	if got := String(); got != "v9.8.7" {
		t.Errorf("String() = %q, want the version set at link time", got)
	}
	Version = ""
	// A test binary is built from the source tree: no module version.
	if got := String(); got != "devel" {
		t.Errorf("String() = %q without a stamped version, want devel", got)
	}
}
