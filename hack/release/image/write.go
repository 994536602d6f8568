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

// Annotations of an OCI image layout's index.json that name an image:
// containerd (`ctr images import`, `kind load image-archive`) reads the
// first, the OCI specification defines the second.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// WriteOCILayout writes idx into dir, an OCI image layout (the directory is
// replaced), and returns its digest. index.json points at idx once for each
// of refs, annotated with that name, which is what an import names the
// image: give REPO:TAG and REPO@DIGEST so that a manifest pinned by digest
// finds the imported image without a registry. Without refs, index.json
// points at idx once, unnamed.
func WriteOCILayout(dir string, idx v1.ImageIndex, refs ...string) (v1.Hash, error) {
	d, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("creating the OCI layout %s: %w", dir, err)
	}
	if len(refs) == 0 {
		refs = []string{""}
	}
	for _, ref := range refs {
		var opts []layout.Option
		if ref != "" {
			if _, err := name.ParseReference(ref); err != nil {
				return v1.Hash{}, fmt.Errorf("image reference %q: %w", ref, err)
			}
			opts = append(opts, layout.WithAnnotations(map[string]string{AnnotationImageName: ref, AnnotationRefName: ref}))
		}
		if err := p.AppendIndex(idx, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("writing the OCI layout %s: %w", dir, err)
		}
	}
	return d, nil
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
	return PushIndex(ctx, ref, idx)
}

// PushIndex uploads idx as it is to ref, so the registry serves it under
// the digest it has here (the one dist/install.yaml pins), with the
// credentials Push uses.
func PushIndex(ctx context.Context, ref string, idx v1.ImageIndex) (v1.Hash, error) {
	dst, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := remote.WriteIndex(dst, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return idx.Digest()
}

// ReadOCILayout returns the image index that the OCI layout in dir holds,
// as WriteOCILayout wrote it (every entry of index.json points at it), and
// the names index.json gives it.
func ReadOCILayout(dir string) (v1.ImageIndex, []string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	if len(m.Manifests) == 0 {
		return nil, nil, fmt.Errorf("the OCI layout %s holds no image", dir)
	}
	var names []string
	for _, desc := range m.Manifests {
		if n := desc.Annotations[AnnotationImageName]; n != "" {
			names = append(names, n)
		}
		if desc.Digest != m.Manifests[0].Digest {
			return nil, nil, fmt.Errorf("the OCI layout %s holds more than one image (%s, %s)", dir, m.Manifests[0].Digest, desc.Digest)
		}
	}
	if !m.Manifests[0].MediaType.IsIndex() {
		return nil, nil, fmt.Errorf("the OCI layout %s holds a %s, not an image index", dir, m.Manifests[0].MediaType)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	return idx, names, err
}
