package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stepwise-dev/stepwise/hack/release"
)

// rel is a release directory, read.
type rel struct {
	dir   string
	files map[string][]byte // the regular files at its top
	// version and repo come from the tag the OCI layout names; pinned is
	// repo@digest, digest the index's.
	version, repo, pinned string
	digest                v1.Hash
	index                 v1.ImageIndex
	names                 []string
	images                map[string]v1.Image // by platform, linux/amd64
	managers              map[string][]byte   // /manager of each image
	caBundle              []byte
	plugins               map[string][]byte // the plugin binary of each archive, by platform
	created               time.Time         // the image's creation time
}

func readRelease(t *testing.T, dir string) *rel {
	t.Helper()
	r := &rel{dir: dir, files: map[string][]byte{}, images: map[string]v1.Image{}, managers: map[string][]byte{}, plugins: map[string][]byte{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the release: %v (make release writes it)", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if r.files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	p, err := layout.FromPath(filepath.Join(dir, release.ImageLayout))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range tm.Manifests {
		if r.digest.Hex != "" && d.Digest != r.digest {
			t.Fatalf("index.json points at %s and %s", r.digest, d.Digest)
		}
		r.digest = d.Digest
		r.names = append(r.names, d.Annotations["io.containerd.image.name"])
		if n := d.Annotations["io.containerd.image.name"]; !strings.Contains(n, "@") {
			i := strings.LastIndex(n, ":")
			r.repo, r.version = n[:i], n[i+1:]
		}
	}
	if r.repo == "" {
		t.Fatalf("the OCI layout names no tag: %q", r.names)
	}
	r.pinned = r.repo + "@" + r.digest.String()
	if r.index, err = top.ImageIndex(r.digest); err != nil {
		t.Fatal(err)
	}
	im, err := r.index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		img, err := r.index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		r.created = cfg.Created.Time
		r.images[d.Platform.String()] = img
		files := imageFiles(t, img)
		r.managers[d.Platform.String()] = files["manager"]
		r.caBundle = files["etc/ssl/certs/ca-certificates.crt"]
	}
	for _, p := range release.PluginPlatforms {
		bin, _ := pluginBinary(t, p, r.files[release.PluginArchive(p)])
		r.plugins[p.String()] = bin
	}
	return r
}

// imageFiles reads the regular files of img's layers.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range readTar(t, rc) {
			if !e.dir {
				out[e.name] = e.data
			}
		}
		_ = rc.Close()
	}
	return out
}

type tarEntry struct {
	name string
	dir  bool
	data []byte
	hdr  *tar.Header
}

func readTar(t *testing.T, r io.Reader) []tarEntry {
	t.Helper()
	tr := tar.NewReader(r)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{name: strings.TrimSuffix(h.Name, "/"), dir: h.Typeflag == tar.TypeDir, data: data, hdr: h})
	}
}

// pluginBinary is the binary in a plugin archive, and whether it is
// executable.
func pluginBinary(t *testing.T, p v1.Platform, archive []byte) ([]byte, bool) {
	t.Helper()
	if p.OS == "windows" {
		zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
		if err != nil {
			t.Fatalf("%s: %v", release.PluginArchive(p), err)
		}
		for _, f := range zr.File {
			if f.Name == release.Plugin+".exe" {
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				data, err := io.ReadAll(rc)
				if err != nil {
					t.Fatal(err)
				}
				return data, true
			}
		}
		t.Fatalf("%s holds no %s.exe", release.PluginArchive(p), release.Plugin)
	}
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("%s: %v", release.PluginArchive(p), err)
	}
	for _, e := range readTar(t, zr) {
		if e.name == release.Plugin {
			return e.data, e.hdr.Mode&0o111 != 0
		}
	}
	t.Fatalf("%s holds no %s", release.PluginArchive(p), release.Plugin)
	return nil, false
}

// renderChart renders c with its default values as `helm template` does.
func renderChart(t *testing.T, c *chart.Chart) []byte {
	t.Helper()
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = "stepwise", "stepwise-system"
	install.Replace = true
	var err error
	if install.KubeVersion, err = common.ParseKubeVersion("v1.37.2"); err != nil {
		t.Fatal(err)
	}
	releaser, err := install.Run(c, map[string]any{})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	hr, ok := releaser.(*helmrelease.Release)
	if !ok {
		t.Fatalf("the install returned a %T", releaser)
	}
	return []byte(hr.Manifest)
}

// deployment is the image of the manager Deployment in manifests.
func (r *rel) deployment(t *testing.T, manifests []byte) string {
	t.Helper()
	docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var images []string
	for {
		u := &unstructured.Unstructured{}
		if err := docs.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() != "Deployment" || u.GetName() != "stepwise-manager" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			m, _ := c.(map[string]any)
			img, _ := m["image"].(string)
			images = append(images, img)
		}
	}
	if len(images) != 1 {
		t.Fatalf("the manager Deployment has images %q, want one", images)
	}
	return images[0]
}

// checkSBOMs: each SBOM names its subject by digest or hash, each binary
// by its SHA-256, and every module Go linked into that binary (read from
// the binary itself) as a component it depends on.
func checkSBOMs(t *testing.T, r *rel) {
	decode := func(name string) *cdx.BOM {
		var b cdx.BOM
		if err := cdx.NewBOMDecoder(bytes.NewReader(r.files[name]), cdx.BOMFileFormatJSON).Decode(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b.Metadata == nil || b.Metadata.Component == nil || b.Components == nil || b.Dependencies == nil {
			t.Fatalf("%s has no subject, components or dependencies", name)
		}
		return &b
	}
	img := decode(release.ImageSBOM)
	if root := img.Metadata.Component; root.Type != cdx.ComponentTypeContainer || root.Version != r.version ||
		root.Hashes == nil || (*root.Hashes)[0].Value != r.digest.Hex || !strings.Contains(root.PackageURL, r.digest.Hex) {
		t.Errorf("%s describes %+v, want the image index %s", release.ImageSBOM, root, r.digest)
	}
	for p, bin := range r.managers {
		checkBinaryInSBOM(t, r, img, "manager", p, bin)
	}
	plugin := decode(release.PluginSBOM)
	if root := plugin.Metadata.Component; root.Name != release.Plugin || root.Version != r.version {
		t.Errorf("%s describes %s %s", release.PluginSBOM, root.Name, root.Version)
	}
	for p, bin := range r.plugins {
		checkBinaryInSBOM(t, r, plugin, release.Plugin, p, bin)
	}
}

func checkBinaryInSBOM(t *testing.T, r *rel, b *cdx.BOM, name, platform string, bin []byte) {
	t.Helper()
	i := slices.IndexFunc(*b.Components, func(c cdx.Component) bool {
		return c.Name == name && c.Properties != nil && slices.Contains(*c.Properties, cdx.Property{Name: "platform", Value: platform})
	})
	if i < 0 {
		t.Errorf("the SBOM has no %s for %s", name, platform)
		return
	}
	c := (*b.Components)[i]
	if c.Hashes == nil || !slices.Contains(*c.Hashes, cdx.Hash{Algorithm: cdx.HashAlgoSHA256, Value: sha256Hex(bin)}) {
		t.Errorf("the SBOM's %s for %s has hashes %v, want SHA-256 %s", name, platform, c.Hashes, sha256Hex(bin))
	}
	var on []string
	for _, d := range *b.Dependencies {
		if d.Ref == c.BOMRef && d.Dependencies != nil {
			on = *d.Dependencies
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	if len(bi.Deps) < 10 {
		t.Fatalf("%s for %s links %d modules: the build info is missing", name, platform, len(bi.Deps))
	}
	for _, m := range bi.Deps {
		v := m.Version
		if m.Replace != nil {
			v = m.Replace.Version
		}
		if v == "" || v == "(devel)" {
			v = r.version // a module of this repository, from its directory
		}
		purl := "pkg:golang/" + m.Path + "@" + strings.ReplaceAll(v, "+", "%2B")
		if !slices.Contains(on, purl) {
			t.Errorf("the SBOM's %s for %s does not depend on %s", name, platform, purl)
		}
	}
	if std := "pkg:golang/stdlib@" + strings.TrimPrefix(bi.GoVersion, "go"); !slices.Contains(on, std) {
		t.Errorf("the SBOM's %s for %s does not depend on %s", name, platform, std)
	}
}

// checkArchives: every archive entry has the image's creation time, which
// is the commit's (or SOURCE_DATE_EPOCH), and owner 0:0 without names;
// gzip headers have no name or time; the release's own archives are
// sorted.
func checkArchives(t *testing.T, r *rel) {
	want := os.Getenv("SOURCE_DATE_EPOCH")
	if want == "" {
		cmd := exec.Command("git", "log", "-1", "--format=%ct")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want = strings.TrimSpace(string(out))
	}
	if got := strconv.FormatInt(r.created.Unix(), 10); got != want {
		t.Errorf("the image was created at %s (%s), want the commit's time %s", got, r.created.UTC(), want)
	}
	check := func(name string, entries []tarEntry, sorted bool) {
		var names []string
		for _, e := range entries {
			names = append(names, e.name)
			h := e.hdr
			if !h.ModTime.Equal(r.created) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: %s has time %s, owner %d:%d (%q:%q)", name, e.name, h.ModTime.UTC(), h.Uid, h.Gid, h.Uname, h.Gname)
			}
		}
		if sorted && !slices.IsSorted(names) {
			t.Errorf("%s: entries not in name order: %q", name, names)
		}
	}
	check(release.ImageArchive, readTar(t, bytes.NewReader(r.files[release.ImageArchive])), true)
	for name, data := range r.files {
		switch {
		case strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".tar.gz"):
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if zr.Name != "" || !zr.ModTime.IsZero() {
				t.Errorf("%s: gzip header name %q, time %s", name, zr.Name, zr.ModTime)
			}
			// Helm writes Chart.yaml and values.yaml first.
			check(name, readTar(t, zr), !strings.HasSuffix(name, ".tgz"))
		case strings.HasSuffix(name, ".zip"):
			zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, f := range zr.File {
				if !f.Modified.Equal(r.created) {
					t.Errorf("%s: %s has time %s", name, f.Name, f.Modified.UTC())
				}
			}
		}
	}
}
