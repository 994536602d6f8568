// Package release builds everything a Stepwise release ships into one
// directory (dist/ for `make release`, hack/release):
//
//   - the manager image for linux/amd64 and linux/arm64, an OCI image
//     index, as an OCI layout (image/) and the same layout as a tarball
//     (stepwise-image.tar) that `ctr images import` and `kind load
//     image-archive` read, naming it REPO:VERSION and REPO@DIGEST;
//   - install.yaml: config/default rendered, the image pinned by the
//     index's digest;
//   - the Helm chart packaged (stepwise-X.Y.Z.tgz), its default image the
//     same digest;
//   - kubectl-stepwise for linux and darwin (amd64, arm64) and windows/amd64
//     as archives, a krew plugin manifest naming them with their SHA-256;
//   - CycloneDX SBOMs of the image and of the plugin;
//   - checksums.txt, the SHA-256 of every file above.
//
// The same commit gives the same bytes with the same Go toolchain: binaries
// are built by image.GoBuild (-trimpath, no build id, no VCS stamp), every
// time written is Options.Created (SOURCE_DATE_EPOCH, the commit's time),
// archive entries are sorted with fixed owners, and gzip headers carry no
// name or time. test/release checks both, and the digests in between.
package release

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/stepwise-dev/stepwise/hack/release/image"
)

const (
	// Repository is where releases publish the manager image.
	Repository = "ghcr.io/stepwise-dev/stepwise"
	// Homepage is the project, whose GitHub releases hold the files.
	Homepage = "https://github.com/stepwise-dev/stepwise"
	// VersionVar is the variable the release stamps into both binaries.
	VersionVar = "github.com/stepwise-dev/stepwise/internal/version.Version"
)

// Names of what Build writes into Options.Out.
const (
	ImageLayout   = "image"
	ImageArchive  = "stepwise-image.tar"
	InstallYAML   = "install.yaml"
	KrewManifest  = "stepwise.krew.yaml"
	ImageSBOM     = "stepwise-image.cdx.json"
	PluginSBOM    = "kubectl-stepwise.cdx.json"
	ChecksumsFile = "checksums.txt"
)

// ChartArchive is the packaged chart's name for version (v0.2.0:
// stepwise-0.2.0.tgz), as `helm package` names it.
func ChartArchive(version string) string {
	return "stepwise-" + strings.TrimPrefix(version, "v") + ".tgz"
}

// ImagePlatforms are the platforms of the manager image.
var ImagePlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Options say what to release.
type Options struct {
	// Root is the repository; Out the directory to write, which must be
	// new or empty.
	Root, Out string
	// Version is the release (v0.2.0). It must be what the tree installs:
	// charts/stepwise's appVersion and config/manager's image tag. Empty:
	// the chart's appVersion.
	Version string
	// Repository is the image's registry and repository; Repository when
	// empty.
	Repository string
	// Revision is the commit, recorded in the image's labels.
	Revision string
	// Created is every time the release writes: the commit's time.
	Created time.Time
	// CACerts is the CA bundle the image ships; image.DefaultCACerts when
	// empty.
	CACerts string
	// Logf receives progress.
	Logf func(string, ...any)
}

// Result is what Build wrote.
type Result struct {
	Version string
	// Index is the digest of the image index; Image the reference that
	// install.yaml and the chart pin (REPOSITORY@DIGEST).
	Index v1.Hash
	Image string
	// Files are the files written at the top of Out, by name, with their
	// contents: all but the OCI layout directory.
	Files map[string][]byte
}

// Build writes the release of the tree at opts.Root into opts.Out.
func Build(ctx context.Context, opts Options) (*Result, error) {
	if opts.Repository == "" {
		opts.Repository = Repository
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	version, err := checkVersion(opts.Root, opts.Version)
	if err != nil {
		return nil, err
	}
	if err := emptyDir(opts.Out); err != nil {
		return nil, err
	}
	res := &Result{Version: version, Files: map[string][]byte{}}
	began := time.Now()

	labels := map[string]string{
		"org.opencontainers.image.source":   Homepage,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if opts.Revision != "" {
		labels["org.opencontainers.image.revision"] = opts.Revision
	}
	images, err := image.Build(ctx, image.Options{
		Dir: opts.Root, Package: "./cmd/manager", Platforms: ImagePlatforms, CACerts: opts.CACerts,
		Created: opts.Created, Labels: labels, Ldflags: "-X " + VersionVar + "=" + version,
	})
	if err != nil {
		return nil, err
	}
	idx, err := image.Index(images)
	if err != nil {
		return nil, err
	}
	if res.Index, err = idx.Digest(); err != nil {
		return nil, err
	}
	res.Image = opts.Repository + "@" + res.Index.String()
	layoutDir := filepath.Join(opts.Out, ImageLayout)
	if _, err := image.WriteOCILayout(layoutDir, idx, opts.Repository+":"+version, res.Image); err != nil {
		return nil, err
	}
	layoutFiles, err := treeFiles(layoutDir)
	if err != nil {
		return nil, err
	}
	if res.Files[ImageArchive], err = plainTar(layoutFiles, opts.Created); err != nil {
		return nil, err
	}
	opts.Logf("release: image %s for %d platforms (%s)", res.Image, len(images), time.Since(began).Round(time.Second))

	if res.Files[InstallYAML], err = installYAML(opts.Root, version, res.Image); err != nil {
		return nil, err
	}
	chart := ChartArchive(version)
	if res.Files[chart], err = packageChart(opts.Root, version, opts.Repository, res.Index.String(), opts.Created); err != nil {
		return nil, err
	}

	began = time.Now()
	plugins, err := buildPlugins(ctx, opts.Root, version, opts.Created)
	if err != nil {
		return nil, err
	}
	for _, p := range plugins {
		res.Files[p.archive] = p.archiveData
	}
	if res.Files[KrewManifest], err = krewManifest(version, plugins); err != nil {
		return nil, err
	}
	opts.Logf("release: %d plugin archives (%s)", len(plugins), time.Since(began).Round(time.Second))

	if res.Files[ImageSBOM], err = imageSBOM(opts.Repository, version, opts.Created, res.Index, images); err != nil {
		return nil, fmt.Errorf("the image's SBOM: %w", err)
	}
	if res.Files[PluginSBOM], err = pluginSBOM(version, opts.Created, plugins); err != nil {
		return nil, fmt.Errorf("the plugin's SBOM: %w", err)
	}
	res.Files[ChecksumsFile] = checksums(res.Files)
	for name, data := range res.Files {
		if err := os.WriteFile(filepath.Join(opts.Out, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkVersion returns the release's version: want, or the chart's
// appVersion when want is empty. It must be a semantic version with a
// leading v, and what the tree installs (the chart's appVersion and
// version, config/manager's tag): a release whose config/default installs
// another tag would not be what its install.yaml is.
func checkVersion(root, want string) (string, error) {
	chart, err := chartMetadata(root)
	if err != nil {
		return "", err
	}
	if want == "" {
		want = chart.AppVersion
	}
	if !strings.HasPrefix(want, "v") {
		return "", fmt.Errorf("version %q: want a tag such as v0.2.0", want)
	}
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(want, "v")); err != nil {
		return "", fmt.Errorf("version %q: want a tag such as v0.2.0: %w", want, err)
	}
	_, tag, err := managerImage(root)
	if err != nil {
		return "", err
	}
	var errs []error
	if chart.AppVersion != want || chart.Version != strings.TrimPrefix(want, "v") {
		errs = append(errs, fmt.Errorf("charts/stepwise/Chart.yaml has version %s and appVersion %s", chart.Version, chart.AppVersion))
	}
	if tag != want {
		errs = append(errs, fmt.Errorf("config/manager/kustomization.yaml sets the image tag %s", tag))
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("releasing %s, but the tree installs another version (set both to %s first): %w", want, want, errors.Join(errs...))
	}
	return want, nil
}

// emptyDir creates dir, or accepts it empty: a release never mixes with
// the files of another.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: a release goes into a new or empty directory", dir)
	}
	return nil
}
