package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/stepwise-dev/stepwise/hack/release/image"
)

// Images the bed builds, on the manager image's base (nonroot, CA bundle,
// /tmp). The manager's own image is the release's (FindRelease).
const (
	// DemoImage is the demo app's repository; its tag is its version.
	DemoImage = "stepwise.local/demo-app"
)

// DemoTags are the demo app's versions; a tag ending in -bad fails 20% of
// its requests.
var DemoTags = []string{"v1", "v2", "v3-bad"}

// BuildImages builds the pause and demo-app images from the repository at
// root (in its test module) and writes them, tagged, into one tarball at path for `ctr images
// import`.
func BuildImages(ctx context.Context, root, path string) error {
	build := func(pkg, entrypoint string, env ...string) (v1.Image, error) {
		imgs, err := image.Build(ctx, image.Options{
			Dir: filepath.Join(root, "test"), Package: pkg, Entrypoint: entrypoint, Env: env,
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
	img, err := build("./realnode/pause", "/pause")
	if err := add(SandboxImage, img, err); err != nil {
		return err
	}
	for _, tag := range DemoTags {
		img, err := build("./realnode/demoapp", "/demoapp", "DEMO_VERSION="+tag)
		if err := add(DemoImage+":"+tag, img, err); err != nil {
			return err
		}
	}
	if err := tarball.MultiRefWriteToFile(path, refs); err != nil {
		return fmt.Errorf("writing images to %s: %w", path, err)
	}
	return nil
}

// BuildTopLayerImages builds, for each tag, the demo app of that version
// with one more layer on top (a file naming the tag), and writes them into
// one tarball at path. Every layer but the top one is the demo app's of
// DemoTags, already in containerd; the top one is new to the node, as a
// release that changes only its last layer is.
func BuildTopLayerImages(ctx context.Context, root, path string, tags []string) error {
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		imgs, err := image.Build(ctx, image.Options{
			Dir: filepath.Join(root, "test"), Package: "./realnode/demoapp", Entrypoint: "/demoapp", Env: []string{"DEMO_VERSION=" + t},
			Created: time.Unix(0, 0),
		})
		if err != nil {
			return fmt.Errorf("building %s: %w", t, err)
		}
		top, err := fileLayer("release", []byte(t+"\n"))
		if err != nil {
			return err
		}
		img, err := mutate.AppendLayers(imgs[0], top)
		if err != nil {
			return fmt.Errorf("adding the top layer of %s: %w", t, err)
		}
		tag, err := name.NewTag(DemoImage + ":" + t)
		if err != nil {
			return err
		}
		refs[tag] = img
	}
	if err := tarball.MultiRefWriteToFile(path, refs); err != nil {
		return fmt.Errorf("writing images to %s: %w", path, err)
	}
	return nil
}

// fileLayer is a layer holding one file.
func fileLayer(path string, content []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// Release is a release as `make release` writes it (hack/release):
// what the bed installs, so that what users install is what is tested.
type Release struct {
	Dir string
	// ImageArchive is the manager's image index as an OCI archive, which
	// names it REPO:VERSION and REPO@DIGEST: imported into containerd it
	// serves install.yaml's image, pinned by digest, without a registry.
	ImageArchive string
	// InstallYAML is config/default rendered with that image.
	InstallYAML string
	// Chart is the packaged Helm chart, whose default image is the same.
	Chart string
}

// FindRelease returns the release in $STEPWISE_DIST, else in root's dist/.
// `make test-node` runs `make release` first and sets STEPWISE_DIST.
func FindRelease(root string) (Release, error) {
	dir := os.Getenv("STEPWISE_DIST")
	if dir == "" {
		dir = filepath.Join(root, "dist")
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	r := Release{Dir: dir, ImageArchive: filepath.Join(dir, "stepwise-image.tar"), InstallYAML: filepath.Join(dir, "install.yaml")}
	charts, err := filepath.Glob(filepath.Join(dir, "stepwise-*.tgz"))
	if err != nil {
		return Release{}, err
	}
	if len(charts) != 1 {
		return Release{}, fmt.Errorf("%s holds %d packaged charts (stepwise-*.tgz), want one: run make release (make test-node does)", dir, len(charts))
	}
	r.Chart = charts[0]
	for _, f := range []string{r.ImageArchive, r.InstallYAML} {
		if _, err := os.Stat(f); err != nil {
			return Release{}, fmt.Errorf("the release in %s: %w (make release writes it; make test-node runs it first)", dir, err)
		}
	}
	return r, nil
}
