// Package image builds the manager's container image from this repository
// without Docker or a registry: a static Go binary on a distroless-like
// base (CA certificates, /etc/passwd with the nonroot user 65532, /tmp),
// assembled with go-containerregistry. It is the one way the image is
// built: `make image`, the release workflow and the real-node tests call it.
//
// Two builds of the same commit with the same Go toolchain give the same
// digest: every file time is the build's Created time (SOURCE_DATE_EPOCH,
// or the Unix epoch), tar entries are written in a fixed order with fixed
// owners, and the binary is built by GoBuild (-trimpath, no build id, no
// VCS stamp, the baseline instruction set).
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// NonRootUID is distroless' "nonroot" user and group, numeric so that
	// Kubernetes can check runAsNonRoot without reading /etc/passwd.
	NonRootUID = 65532
	// Entrypoint is where the binary lives in the image.
	Entrypoint = "/manager"
	// DefaultCACerts is Debian's bundle of trusted CAs (package
	// ca-certificates), what the manager uses for HTTPS to Prometheus and
	// webhooks. The Makefile's CA_CERTS names another.
	DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"
)

// Options say what to build.
type Options struct {
	// Dir is the module root to build in; Package the main package in it.
	Dir, Package string
	// Platforms to build for; the build machine's linux/GOARCH when empty.
	Platforms []v1.Platform
	// CACerts is the CA bundle to ship; DefaultCACerts when empty.
	CACerts string
	// Created stamps the image config and every file in it.
	Created time.Time
	// Labels go into the image config (org.opencontainers.image.*).
	Labels map[string]string
	// Entrypoint is where the binary goes and what the image runs;
	// Entrypoint (the constant, the manager's) when empty. The real-node
	// tests build their pause and demo-app images with it.
	Entrypoint string
	// Env is added to the image's environment (NAME=value).
	Env []string
	// Ldflags are added to the linker flags, e.g. -X to stamp a version.
	Ldflags string
}

// Build compiles the binary for each platform and assembles one image per
// platform, in the order of opts.Platforms.
func Build(ctx context.Context, opts Options) ([]v1.Image, error) {
	if len(opts.Platforms) == 0 {
		opts.Platforms = []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}
	}
	if opts.CACerts == "" {
		opts.CACerts = DefaultCACerts
	}
	if opts.Entrypoint == "" {
		opts.Entrypoint = Entrypoint
	}
	certs, err := os.ReadFile(opts.CACerts)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle the image ships (CA_CERTS in the Makefile, --ca-certs here; Debian's package ca-certificates installs %s): %w", DefaultCACerts, err)
	}
	base, err := layer(baseFiles(certs), opts.Created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	tmp, err := os.MkdirTemp("", "stepwise-image-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	var images []v1.Image
	for _, p := range opts.Platforms {
		bin := filepath.Join(tmp, p.OS+"-"+p.Architecture+p.Variant)
		if err := GoBuild(ctx, opts.Dir, opts.Package, p, opts.Ldflags, bin); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		app, err := layer([]file{{name: strings.TrimPrefix(opts.Entrypoint, "/"), mode: 0o755, data: data}}, opts.Created)
		if err != nil {
			return nil, fmt.Errorf("binary layer: %w", err)
		}
		img, err := assemble(p, opts, base, app)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		images = append(images, img)
	}
	return images, nil
}

// GoBuild builds a static binary for p as the release does: no cgo, no
// local paths (-trimpath), no symbol table, no build id and no VCS stamp,
// for the baseline instruction set of p's architecture whatever GOAMD64 or
// GOARM64 the caller's environment sets. So the bytes depend only on the
// source, ldflags and the Go toolchain.
func GoBuild(ctx context.Context, dir, pkg string, p v1.Platform, ldflags, out string) error {
	flags := strings.TrimSpace("-s -w -buildid= " + ldflags)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", flags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOAMD64=v1", "GOARM64=v8.0")
	if p.Architecture == "arm" && p.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, p, err, output)
	}
	return nil
}

func assemble(p v1.Platform, opts Options, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: opts.Created.UTC()}
	cfg.Config.User = fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)
	cfg.Config.Entrypoint = []string{opts.Entrypoint}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = append([]string{"PATH=/", "SSL_CERT_FILE=" + DefaultCACerts}, opts.Env...)
	cfg.Config.Labels = opts.Labels
	cfg.History = nil
	return mutate.ConfigFile(img, cfg)
}

// file is one entry of a layer: a directory when data is nil and dir set.
type file struct {
	name     string
	mode     int64
	dir      bool
	uid, gid int
	data     []byte
}

// baseFiles is what distroless/static:nonroot offers the manager: CA
// certificates, the users root and nonroot, and a writable /tmp (the
// manager's root filesystem is read-only; an emptyDir may be mounted).
func baseFiles(certs []byte) []file {
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true, uid: NonRootUID, gid: NonRootUID},
		{name: "root", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// layer writes files, sorted by name, into an uncompressed tar with every
// time set to created, and wraps it as a gzip-compressed layer.
func layer(files []file, created time.Time) (v1.Layer, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: created.UTC(), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		// PAX would add access and change times of the build machine.
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
