package release

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"path"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/hack/release"
)

// checkPlugin: checksums.txt lists every file with its SHA-256; the krew
// manifest names each archive at its download address with the same
// SHA-256; each archive holds an executable for its platform, stamped with
// the release's version.
func checkPlugin(t *testing.T, r *rel) {
	sums := map[string]string{}
	for line := range strings.Lines(string(r.files[release.ChecksumsFile])) {
		sum, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", line)
		}
		sums[name] = sum
	}
	for name, data := range r.files {
		if name == release.ChecksumsFile {
			continue
		}
		if sums[name] != sha256Hex(data) {
			t.Errorf("checksums.txt has %q for %s, whose SHA-256 is %s", sums[name], name, sha256Hex(data))
		}
		delete(sums, name)
	}
	for name := range sums {
		t.Errorf("checksums.txt lists %s, which the release does not hold", name)
	}

	var krew struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(r.files[release.KrewManifest], &krew); err != nil {
		t.Fatal(err)
	}
	if krew.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || krew.Kind != "Plugin" || krew.Metadata.Name != "stepwise" || krew.Spec.Version != r.version {
		t.Errorf("krew manifest %s %s %s version %s", krew.APIVersion, krew.Kind, krew.Metadata.Name, krew.Spec.Version)
	}
	var seen []string
	for _, kp := range krew.Spec.Platforms {
		p := v1.Platform{OS: kp.Selector.MatchLabels["os"], Architecture: kp.Selector.MatchLabels["arch"]}
		seen = append(seen, p.String())
		archive := path.Base(kp.URI)
		if want := "https://github.com/stepwise-dev/stepwise/releases/download/" + r.version + "/" + release.PluginArchive(p); kp.URI != want {
			t.Errorf("krew %s: uri %s, want %s", p, kp.URI, want)
		}
		data, ok := r.files[archive]
		if !ok {
			t.Errorf("krew %s names %s, which the release does not hold", p, archive)
			continue
		}
		if kp.SHA256 != sha256Hex(data) {
			t.Errorf("krew %s: sha256 %s, the archive's is %s", p, kp.SHA256, sha256Hex(data))
		}
		bin, executable := pluginBinary(t, p, data)
		if kp.Bin != path.Base(kp.Bin) || !strings.HasPrefix(kp.Bin, release.Plugin) || !executable {
			t.Errorf("krew %s: bin %q; the archive's binary executable: %v", p, kp.Bin, executable)
		}
		checkExecutable(t, p, bin)
		bi, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		// Go records no -ldflags with -trimpath, so the version stamped is
		// not visible here.
		if settings["GOOS"] != p.OS || settings["GOARCH"] != p.Architecture || settings["-trimpath"] != "true" || settings["CGO_ENABLED"] != "0" {
			t.Errorf("%s was built with %v: want %s, -trimpath and no cgo", archive, settings, p)
		}
	}
	slices.Sort(seen)
	var want []string
	for _, p := range release.PluginPlatforms {
		want = append(want, p.String())
	}
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("krew platforms %q, want %q", seen, want)
	}
}

// checkExecutable: bin is an executable of p's format and machine.
func checkExecutable(t *testing.T, p v1.Platform, bin []byte) {
	t.Helper()
	var machine string
	switch p.OS {
	case "linux":
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: not ELF: %v", p, err)
		}
		machine = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
	case "darwin":
		f, err := macho.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: not Mach-O: %v", p, err)
		}
		machine = map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
	case "windows":
		f, err := pe.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: not PE: %v", p, err)
		}
		machine = map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "amd64", pe.IMAGE_FILE_MACHINE_ARM64: "arm64"}[f.Machine]
	}
	if machine != p.Architecture {
		t.Errorf("the %s binary is for %q", p, machine)
	}
}
