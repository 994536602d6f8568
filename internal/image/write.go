package image

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index puts one image per platform into an OCI image index, which is what
// a registry serves for a multi-platform tag.
func Index(images []v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cfg.Platform()
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return idx, nil
}

// WriteOCILayout writes the index of images into dir, an OCI image layout
// (the directory is replaced).
func WriteOCILayout(dir string, images []v1.Image) (v1.Hash, error) {
	idx, err := Index(images)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	return idx.Digest()
}

// WriteTarball writes one image, tagged ref, as a tarball that `docker
// load`, `ctr images import` and `kind load image-archive` read.
func WriteTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Push uploads the images to ref, as an index when there are several, with
// the credentials of the Docker config (~/.docker/config.json) or the
// environment's credential helpers.
func Push(ctx context.Context, ref string, images []v1.Image) (v1.Hash, error) {
	if len(images) == 0 {
		return v1.Hash{}, errors.New("no image to push")
	}
	dst, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if len(images) == 1 {
		if err := remote.Write(dst, images[0], opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		return images[0].Digest()
	}
	idx, err := Index(images)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(dst, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return idx.Digest()
}
