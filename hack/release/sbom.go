package release

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/stepwise-dev/stepwise/hack/release/image"
)

// SBOMs are CycloneDX 1.6 JSON. Each binary's components are read from the
// build information Go writes into it (debug/buildinfo): exactly the
// modules linked into that binary, and the standard library of the Go
// toolchain that built it.
const (
	mainModule = "github.com/stepwise-dev/stepwise"
	caBundle   = "etc/ssl/certs/ca-certificates.crt"
)

// bom collects components once each, by bom-ref, and the dependencies.
type bom struct {
	components map[string]cdx.Component
	deps       map[string][]string
}

func newBOM() *bom {
	return &bom{components: map[string]cdx.Component{}, deps: map[string][]string{}}
}

func (b *bom) add(c cdx.Component) { b.components[c.BOMRef] = c }

func (b *bom) dependsOn(ref string, on ...string) { b.deps[ref] = append(b.deps[ref], on...) }

// goBinary adds a Go binary built for p as ref, with a component for each
// module and the standard library it links, and returns ref.
func (b *bom) goBinary(ref, name, version string, p v1.Platform, data []byte) error {
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s for %s: %w", name, p, err)
	}
	b.add(cdx.Component{
		BOMRef: ref, Type: cdx.ComponentTypeApplication, Name: name, Version: version,
		PackageURL: purl(mainModule, version) + "#" + strings.TrimPrefix(bi.Path, mainModule+"/"),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: sha256Hex(data)}},
		Licenses:   &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}},
		Properties: &[]cdx.Property{{Name: "platform", Value: p.String()}, {Name: "go", Value: bi.GoVersion}},
	})
	std := cdx.Component{Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: strings.TrimPrefix(bi.GoVersion, "go")}
	std.PackageURL = purl("stdlib", std.Version)
	std.BOMRef = std.PackageURL
	b.add(std)
	b.dependsOn(ref, std.BOMRef)
	for _, m := range bi.Deps {
		path, v := m.Path, m.Version
		if m.Replace != nil {
			v = m.Replace.Version
		}
		if v == "" || v == "(devel)" {
			// A module of this repository, replaced by its directory.
			v = version
		}
		c := cdx.Component{Type: cdx.ComponentTypeLibrary, Name: path, Version: v, PackageURL: purl(path, v)}
		c.BOMRef = c.PackageURL
		b.add(c)
		b.dependsOn(ref, c.BOMRef)
	}
	return nil
}

// purl is the package URL of a Go module version.
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + strings.ReplaceAll(url.PathEscape(version), "+", "%2B")
}

// encode writes the BOM about root, everything sorted by bom-ref.
func (b *bom) encode(root cdx.Component, created time.Time) ([]byte, error) {
	doc := cdx.NewBOM()
	doc.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &root,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "stepwise hack/release", Version: root.Version,
		}}},
	}
	refs := make([]string, 0, len(b.components))
	for ref := range b.components {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	comps := make([]cdx.Component, 0, len(refs))
	for _, ref := range refs {
		comps = append(comps, b.components[ref])
	}
	doc.Components = &comps
	from := make([]string, 0, len(b.deps))
	for ref := range b.deps {
		from = append(from, ref)
	}
	slices.Sort(from)
	var deps []cdx.Dependency
	for _, ref := range from {
		on := slices.Compact(slices.Sorted(slices.Values(b.deps[ref])))
		deps = append(deps, cdx.Dependency{Ref: ref, Dependencies: &on})
	}
	doc.Dependencies = &deps
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(doc, cdx.SpecVersion1_6); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// imageSBOM describes the image index: one image per platform, each the
// manager binary (with its modules) on the base files, of which the CA
// bundle is the one that comes from outside this repository.
func imageSBOM(repo, version string, created time.Time, index v1.Hash, images []v1.Image) ([]byte, error) {
	b := newBOM()
	root := cdx.Component{
		BOMRef: "image", Type: cdx.ComponentTypeContainer, Name: repo, Version: version,
		PackageURL: ociPURL(repo, index, ""),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: index.Hex}},
		Licenses:   &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}},
	}
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		p := *cfg.Platform()
		files, err := binaryLayerFiles(img)
		if err != nil {
			return nil, err
		}
		ref := "image:" + p.String()
		b.add(cdx.Component{
			BOMRef: ref, Type: cdx.ComponentTypeContainer, Name: repo, Version: version,
			PackageURL: ociPURL(repo, d, p.Architecture),
			Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: d.Hex}},
			Properties: &[]cdx.Property{{Name: "platform", Value: p.String()}},
		})
		b.dependsOn(root.BOMRef, ref)
		manager := "manager:" + p.String()
		if err := b.goBinary(manager, "manager", version, p, files[strings.TrimPrefix(image.Entrypoint, "/")]); err != nil {
			return nil, err
		}
		certs, ok := files[caBundle]
		if !ok {
			return nil, fmt.Errorf("the image for %s has no /%s", p, caBundle)
		}
		ca := cdx.Component{BOMRef: "file:" + caBundle, Type: cdx.ComponentTypeFile, Name: "/" + caBundle,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: sha256Hex(certs)}}}
		b.add(ca)
		b.dependsOn(ref, manager, ca.BOMRef)
	}
	return b.encode(root, created)
}

// ociPURL is the package URL of an image (or index) by digest.
func ociPURL(repo string, d v1.Hash, arch string) string {
	name := repo[strings.LastIndex(repo, "/")+1:]
	q := url.Values{"repository_url": {repo}}
	if arch != "" {
		q.Set("arch", arch)
	}
	return "pkg:oci/" + name + "@" + url.PathEscape(d.String()) + "?" + q.Encode()
}

// binaryLayerFiles reads every regular file of img's layers by name.
func binaryLayerFiles(img v1.Image) (map[string][]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				_ = rc.Close()
				return nil, err
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			if out[h.Name], err = io.ReadAll(tr); err != nil {
				_ = rc.Close()
				return nil, err
			}
		}
		_ = rc.Close()
	}
	return out, nil
}

// pluginSBOM describes kubectl-stepwise: one binary per platform, each with
// the modules it links.
func pluginSBOM(version string, created time.Time, builds []pluginBuild) ([]byte, error) {
	b := newBOM()
	root := cdx.Component{
		BOMRef: Plugin, Type: cdx.ComponentTypeApplication, Name: Plugin, Version: version,
		PackageURL: purl(mainModule, version) + "#cmd/" + Plugin,
		Licenses:   &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}},
	}
	for _, p := range builds {
		ref := Plugin + ":" + p.platform.String()
		if err := b.goBinary(ref, Plugin, version, p.platform, p.binary); err != nil {
			return nil, err
		}
		b.dependsOn(root.BOMRef, ref)
	}
	return b.encode(root, created)
}
