package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.yaml.in/yaml/v3"

	"github.com/stepwise-dev/stepwise/hack/release/image"
)

// Plugin is the kubectl plugin's binary name.
const Plugin = "kubectl-stepwise"

// PluginPlatforms are the platforms the plugin is released for.
var PluginPlatforms = []v1.Platform{
	{OS: "darwin", Architecture: "amd64"},
	{OS: "darwin", Architecture: "arm64"},
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
	{OS: "windows", Architecture: "amd64"},
}

// PluginArchive is the name of the plugin's archive for p: a zip for
// Windows, a gzipped tar elsewhere.
func PluginArchive(p v1.Platform) string {
	if p.OS == "windows" {
		return fmt.Sprintf("%s_%s_%s.zip", Plugin, p.OS, p.Architecture)
	}
	return fmt.Sprintf("%s_%s_%s.tar.gz", Plugin, p.OS, p.Architecture)
}

// pluginBinary is the binary's name in the archive for p.
func pluginBinary(p v1.Platform) string {
	if p.OS == "windows" {
		return Plugin + ".exe"
	}
	return Plugin
}

// pluginBuild is the plugin built for one platform.
type pluginBuild struct {
	platform    v1.Platform
	binary      []byte
	archive     string
	archiveData []byte
}

// buildPlugins builds the plugin for each of PluginPlatforms and archives
// it with the LICENSE.
func buildPlugins(ctx context.Context, root, version string, created time.Time) ([]pluginBuild, error) {
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "stepwise-plugin-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	var out []pluginBuild
	for _, p := range PluginPlatforms {
		bin := filepath.Join(tmp, p.OS+"-"+p.Architecture, pluginBinary(p))
		if err := image.GoBuild(ctx, root, "./cmd/"+Plugin, p, "-X "+VersionVar+"="+version, bin); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		files := []file{{name: pluginBinary(p), mode: 0o755, data: data}, {name: "LICENSE", mode: 0o644, data: license}}
		b := pluginBuild{platform: p, binary: data, archive: PluginArchive(p)}
		if p.OS == "windows" {
			b.archiveData, err = zipped(files, created)
		} else {
			b.archiveData, err = tarGz(files, created)
		}
		if err != nil {
			return nil, fmt.Errorf("archiving %s: %w", b.archive, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// The krew plugin manifest (krew.sigs.k8s.io, apiVersion v1alpha2).
type krewPlugin struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec krewSpec `yaml:"spec"`
}

type krewSpec struct {
	Version          string         `yaml:"version"`
	Homepage         string         `yaml:"homepage"`
	ShortDescription string         `yaml:"shortDescription"`
	Description      string         `yaml:"description"`
	Platforms        []krewPlatform `yaml:"platforms"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	URI    string `yaml:"uri"`
	SHA256 string `yaml:"sha256"`
	Bin    string `yaml:"bin"`
}

// krewManifest is the krew plugin manifest of the release: each archive
// by its download address on the GitHub release, with its SHA-256.
func krewManifest(version string, builds []pluginBuild) ([]byte, error) {
	var k krewPlugin
	k.APIVersion, k.Kind = "krew.googlecontainertools.github.com/v1alpha2", "Plugin"
	k.Metadata.Name = "stepwise"
	k.Spec = krewSpec{
		Version:          version,
		Homepage:         Homepage,
		ShortDescription: "Show, plan and steer Stepwise Rollouts",
		Description: "The kubectl plugin of Stepwise (progressive delivery with in-place\n" +
			"updates): shows a Rollout's steps and measurements, promotes, aborts,\n" +
			"pauses and resumes it, waits for it in CI, plans a Rollout for a\n" +
			"CloneSet, and serves a live dashboard.\n",
	}
	for _, b := range builds {
		var p krewPlatform
		p.Selector.MatchLabels = map[string]string{"os": b.platform.OS, "arch": b.platform.Architecture}
		p.URI = DownloadURL(version, b.archive)
		p.SHA256 = sha256Hex(b.archiveData)
		p.Bin = pluginBinary(b.platform)
		k.Spec.Platforms = append(k.Spec.Platforms, p)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(k); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DownloadURL is where the GitHub release of version serves name.
func DownloadURL(version, name string) string {
	return Homepage + "/releases/download/" + version + "/" + name
}
