// Package version says which release a binary is. The release build
// (hack/release) sets Version with the linker:
//
//	-ldflags "-X github.com/stepwise-dev/stepwise/internal/version.Version=v0.2.0"
//
// A binary built otherwise (go build, go install) reports the module version
// Go recorded, or "devel".
package version

import "runtime/debug"

// Version is the release tag, set at link time; empty in other builds.
var Version string

// String is Version, else the main module's version from the build info
// (what `go install ...@v0.2.0` records), else "devel".
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
