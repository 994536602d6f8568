package realnode

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/stepwise-dev/stepwise/internal/image"
)

// Images the bed builds. The manager's is built exactly as `make image`
// builds it; the others use the same base (nonroot, CA bundle, /tmp).
const (
	ManagerImage = "stepwise.local/stepwise:realnode"
	// DemoImage is the demo app's repository; its tag is its version.
	DemoImage = "stepwise.local/demo-app"
)

// DemoTags are the demo app's versions; a tag ending in -bad fails 20% of
// its requests.
var DemoTags = []string{"v1", "v2", "v3-bad"}

// BuildImages builds the pause, demo-app and manager images from the
// repository at root and writes them, tagged, into one tarball at path for
// `ctr images import`.
func BuildImages(ctx context.Context, root, path string) error {
	build := func(pkg, entrypoint string, env ...string) (v1.Image, error) {
		imgs, err := image.Build(ctx, image.Options{
			Dir: root, Package: pkg, Entrypoint: entrypoint, Env: env,
			Created: time.Unix(0, 0),
		})
		if err != nil {
			return nil, err
		}
		return imgs[0], nil
	}
	refs := map[name.Reference]v1.Image{}
	add := func(ref string, img v1.Image, err error) error {
		if err != nil {
			return fmt.Errorf("building %s: %w", ref, err)
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		refs[tag] = img
		return nil
	}
	img, err := build("./test/realnode/pause", "/pause")
	if err := add(SandboxImage, img, err); err != nil {
		return err
	}
	for _, tag := range DemoTags {
		img, err := build("./test/realnode/demoapp", "/demoapp", "DEMO_VERSION="+tag)
		if err := add(DemoImage+":"+tag, img, err); err != nil {
			return err
		}
	}
	img, err = build("./cmd/manager", "")
	if err := add(ManagerImage, img, err); err != nil {
		return err
	}
	if err := tarball.MultiRefWriteToFile(path, refs); err != nil {
		return fmt.Errorf("writing images to %s: %w", path, err)
	}
	return nil
}
