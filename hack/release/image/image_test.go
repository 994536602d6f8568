package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestManagerImage builds the manager image twice and checks what a
// Dockerfile would promise (user, entrypoint, files), and that the two
// builds are the same image.
func TestManagerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the manager")
	}
	certs := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: filepath.Join("..", "..", ".."), Package: "./cmd/manager", CACerts: certs,
		Created: time.Unix(1700000000, 0), Labels: map[string]string{"org.opencontainers.image.version": "v0.0.0-test"}}
	first, err := Build(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("built %d and %d images for the build machine's platform, want 1", len(first), len(second))
	}
	img := first[0]
	d1, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := second[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds of the same tree differ: %s and %s", d1, d2)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want the numeric nonroot 65532:65532 (runAsNonRoot needs a number)", cfg.Config.User)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != "/manager" {
		t.Errorf("entrypoint %q", cfg.Config.Entrypoint)
	}
	if !cfg.Created.Equal(opts.Created) || cfg.Config.Labels["org.opencontainers.image.version"] != "v0.0.0-test" {
		t.Errorf("created %s, labels %v", cfg.Created, cfg.Config.Labels)
	}

	files := filesOf(t, img)
	for name, want := range map[string]string{
		"etc/passwd":                        "nonroot:x:65532:65532:",
		"etc/group":                         "nonroot:x:65532:",
		"etc/ssl/certs/ca-certificates.crt": "-----BEGIN CERTIFICATE-----",
	} {
		if h, ok := files[name]; !ok || !strings.Contains(string(h.data), want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
	if h := files["tmp/"]; h.hdr == nil || h.hdr.Mode&0o1777 != 0o1777 {
		t.Errorf("no world-writable sticky /tmp: %+v", h.hdr)
	}
	for name, f := range files {
		if !f.hdr.ModTime.Equal(opts.Created) {
			t.Errorf("%s has time %s, not the build's %s", name, f.hdr.ModTime, opts.Created)
		}
	}
	bin, ok := files["manager"]
	if !ok || bin.hdr.Mode&0o111 == 0 {
		t.Fatalf("no executable /manager")
	}
	exe, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("/manager: %v", err)
	}
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/manager is dynamically linked: the image has no libc")
		}
	}
	if exe.Section(".symtab") != nil {
		t.Error("/manager keeps its symbol table (-s -w)")
	}

	// The same image read back from each output.
	dir := t.TempDir()
	built, err := Index(first)
	if err != nil {
		t.Fatal(err)
	}
	idxDigest, err := built.Digest()
	if err != nil {
		t.Fatal(err)
	}
	const ref = "registry.example/stepwise:dev"
	if d, err := WriteOCILayout(filepath.Join(dir, "oci"), built, ref); err != nil || d != idxDigest {
		t.Fatalf("WriteOCILayout: %s, %v; want the index %s", d, err, idxDigest)
	}
	p, err := layout.FromPath(filepath.Join(dir, "oci"))
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
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest != idxDigest || tm.Manifests[0].Annotations[AnnotationImageName] != ref {
		t.Errorf("index.json %+v, want the index %s named %s", tm.Manifests, idxDigest, ref)
	}
	idx, names, err := ReadOCILayout(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != ref {
		t.Errorf("the layout names the image %q, want %s", names, ref)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != d1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Errorf("OCI layout index %+v, want the image %s with its platform", m.Manifests, d1)
	}
	tb := filepath.Join(dir, "image.tar")
	if err := WriteTarball(tb, "registry.example/stepwise:dev", img); err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A tarball keeps the config and layers, not the manifest (docker load
	// writes its own): the same image has the same config digest, its ID.
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := loaded.ConfigName(); err != nil || got != id {
		t.Errorf("the tarball holds the image %s (%v), want %s", got, err, id)
	}
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// filesOf reads every file of every layer of img.
func filesOf(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entry{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = entry{hdr: h, data: data}
		}
		_ = rc.Close()
	}
	return out
}

// TestMissingCABundleSaysWhereItComesFrom: without the CA bundle the
// build stops before compiling, naming the file, the Makefile's CA_CERTS
// and Debian's package.
func TestMissingCABundleSaysWhereItComesFrom(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca-certificates.crt")
	_, err := Build(t.Context(), Options{Dir: filepath.Join("..", "..", ".."), Package: "./cmd/manager", CACerts: missing})
	if err == nil {
		t.Fatal("built an image without its CA bundle")
	}
	for _, want := range []string{missing, "CA_CERTS", "ca-certificates"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
