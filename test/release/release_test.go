// Package release checks a release as a user gets it: the directory `make
// release` wrote (STEPWISE_DIST; `make test-release` sets it), or, without
// it, one this test builds with hack/release. It reads every file with the
// libraries a user's tools use (go-containerregistry, Helm, kustomize,
// CycloneDX), independently of hack/release's code, then builds the
// release a second time and compares every file's SHA-256.
package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/validate"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/stepwise-dev/stepwise/hack/release"
)

const root = "../.."

func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release")
	}
	dist := os.Getenv("STEPWISE_DIST")
	if dist == "" {
		dist = filepath.Join(t.TempDir(), "dist")
		buildRelease(t, dist)
	} else if !filepath.IsAbs(dist) {
		dist = filepath.Join(root, dist)
	}
	r := readRelease(t, dist)
	t.Logf("release %s: image %s, created %s", r.version, r.pinned, r.created.UTC())

	t.Run("Files", func(t *testing.T) {
		want := []string{release.ChecksumsFile, release.ImageArchive, release.ImageSBOM, release.InstallYAML,
			release.KrewManifest, release.PluginSBOM, "stepwise-" + strings.TrimPrefix(r.version, "v") + ".tgz"}
		for _, p := range release.PluginPlatforms {
			want = append(want, release.PluginArchive(p))
		}
		slices.Sort(want)
		var got []string
		for name := range r.files {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("files %q, want %q", got, want)
		}
	})
	t.Run("ImageIndex", func(t *testing.T) { checkImage(t, r) })
	t.Run("InstallYAMLPinsTheIndex", func(t *testing.T) { checkInstallYAML(t, r) })
	t.Run("ChartDefaultsToTheIndex", func(t *testing.T) { checkChart(t, r) })
	t.Run("ChecksumsAndKrew", func(t *testing.T) { checkPlugin(t, r) })
	t.Run("SBOMs", func(t *testing.T) { checkSBOMs(t, r) })
	t.Run("ArchivesCarryOnlyTheCommitTime", func(t *testing.T) { checkArchives(t, r) })
	t.Run("SameBytesTwice", func(t *testing.T) {
		// The image's CA bundle and labels come from dist/, so that the
		// second build is given what the first was.
		certs := filepath.Join(t.TempDir(), "ca.crt")
		if err := os.WriteFile(certs, r.caBundle, 0o644); err != nil {
			t.Fatal(err)
		}
		again := filepath.Join(t.TempDir(), "dist")
		began := time.Now()
		buildRelease(t, again, "--version", r.version, "--repository", r.repo, "--ca-certs", certs)
		t.Logf("second release built in %s", time.Since(began).Round(time.Second))
		first, second := treeSums(t, dist), treeSums(t, again)
		for name, sum := range first {
			if second[name] != sum {
				t.Errorf("%s differs between two builds of the same tree: %s, then %s", name, sum, second[name])
			}
		}
		for name := range second {
			if _, ok := first[name]; !ok {
				t.Errorf("%s is only in the second build", name)
			}
		}
		t.Logf("%d files compared", len(first))
	})
}

// buildRelease runs hack/release, as make release does (built in its own
// module, run from the repository root), into out.
func buildRelease(t *testing.T, out string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	tool := filepath.Join(t.TempDir(), "stepwise-release")
	build := exec.CommandContext(ctx, "go", "-C", filepath.Join(root, "hack", "release"), "build", "-o", tool, "./cmd/release")
	if output, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/release: %v\n%s", err, output)
	}
	cmd := exec.CommandContext(ctx, tool, append([]string{"--out", out}, args...)...)
	cmd.Dir = root
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/release: %v\n%s", err, output)
	}
	t.Logf("hack/release:\n%s", output)
}

// treeSums is the SHA-256 of every file under dir, by relative path.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sums[rel] = sha256Hex(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// checkImage: the layout names the index REPO:VERSION and REPO@DIGEST, its
// blobs are whole, it holds one image per platform stamped with the
// version, and the tarball is the layout, file for file.
func checkImage(t *testing.T, r *rel) {
	if want := []string{r.repo + ":" + r.version, r.pinned}; !slices.Equal(r.names, want) {
		t.Errorf("the OCI layout names the index %q, want %q", r.names, want)
	}
	if err := validate.Index(r.index); err != nil {
		t.Errorf("the image index does not hold together: %v", err)
	}
	var platforms []string
	for p, img := range r.images {
		platforms = append(platforms, p)
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Platform().String(); got != p {
			t.Errorf("the index lists %s for an image of %s", p, got)
		}
		if cfg.Config.Labels["org.opencontainers.image.version"] != r.version {
			t.Errorf("%s: labels %v, want version %s", p, cfg.Config.Labels, r.version)
		}
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the index holds %q, want linux/amd64 and linux/arm64", platforms)
	}
	layoutFiles := map[string][]byte{}
	err := filepath.WalkDir(filepath.Join(r.dir, release.ImageLayout), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(r.dir, release.ImageLayout), path)
		layoutFiles[filepath.ToSlash(rel)], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	inTar := map[string][]byte{}
	for _, e := range readTar(t, bytes.NewReader(r.files[release.ImageArchive])) {
		if !e.dir {
			inTar[e.name] = e.data
		}
	}
	if len(inTar) != len(layoutFiles) {
		t.Errorf("%s holds %d files, the layout %d", release.ImageArchive, len(inTar), len(layoutFiles))
	}
	for name, data := range layoutFiles {
		if !bytes.Equal(inTar[name], data) {
			t.Errorf("%s: %s is not the layout's", release.ImageArchive, name)
		}
	}
}

// checkInstallYAML: install.yaml is config/default as kustomize renders it,
// but for the manager's image, the index by digest.
func checkInstallYAML(t *testing.T, r *rel) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified
	resMap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	tagged := fmt.Sprintf("image: %s:%s\n", r.repo, r.version)
	if n := bytes.Count(rendered, []byte(tagged)); n != 1 {
		t.Fatalf("config/default names %q %d times, want once", tagged, n)
	}
	want := bytes.Replace(rendered, []byte(tagged), []byte("image: "+r.pinned+"\n"), 1)
	_, body, ok := bytes.Cut(r.files[release.InstallYAML], []byte("\napiVersion: "))
	if !ok || !bytes.Equal(append([]byte("apiVersion: "), body...), want) {
		t.Errorf("install.yaml is not config/default with the image %s", r.pinned)
	}
	if d := r.deployment(t, r.files[release.InstallYAML]); d != r.pinned {
		t.Errorf("install.yaml runs the manager from %q, want %s", d, r.pinned)
	}
}

// checkChart: the packaged chart is the release's version, and renders the
// manager on the index by digest with its default values.
func checkChart(t *testing.T, r *rel) {
	c, err := loader.LoadArchive(bytes.NewReader(r.files["stepwise-"+strings.TrimPrefix(r.version, "v")+".tgz"]))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Version != strings.TrimPrefix(r.version, "v") || c.Metadata.AppVersion != r.version {
		t.Errorf("chart version %s, appVersion %s, want %s", c.Metadata.Version, c.Metadata.AppVersion, r.version)
	}
	img, _ := c.Values["image"].(map[string]any)
	if img["repository"] != r.repo || img["digest"] != r.digest.String() {
		t.Errorf("chart values image %v, want repository %s and digest %s", img, r.repo, r.digest)
	}
	if got := r.deployment(t, renderChart(t, c)); got != r.pinned {
		t.Errorf("the chart runs the manager from %q, want %s", got, r.pinned)
	}
}
