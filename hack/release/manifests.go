package release

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const chartDir = "charts/stepwise"

// chartMetadata is charts/stepwise/Chart.yaml.
func chartMetadata(root string) (*chart.Metadata, error) {
	data, err := os.ReadFile(filepath.Join(root, chartDir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	var m chart.Metadata
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s/Chart.yaml: %w", chartDir, err)
	}
	return &m, nil
}

// managerImage is the image config/manager installs: its name and tag.
func managerImage(root string) (name, tag string, err error) {
	data, err := os.ReadFile(filepath.Join(root, "config", "manager", "kustomization.yaml"))
	if err != nil {
		return "", "", err
	}
	var k struct {
		Images []struct {
			Name   string `json:"name"`
			NewTag string `json:"newTag"`
		} `json:"images"`
		Labels []struct {
			Pairs map[string]string `json:"pairs"`
		} `json:"labels"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return "", "", fmt.Errorf("config/manager/kustomization.yaml: %w", err)
	}
	if len(k.Images) != 1 || k.Images[0].Name == "" || k.Images[0].NewTag == "" {
		return "", "", fmt.Errorf("config/manager/kustomization.yaml: want one images entry with name and newTag, have %+v", k.Images)
	}
	var label string
	for _, l := range k.Labels {
		if v, ok := l.Pairs[versionLabel]; ok {
			label = v
		}
	}
	if label != k.Images[0].NewTag {
		return "", "", fmt.Errorf("config/manager/kustomization.yaml: label %s is %q, not the image tag %s", versionLabel, label, k.Images[0].NewTag)
	}
	return k.Images[0].Name, k.Images[0].NewTag, nil
}

// versionLabel names the release a Deployment runs, as Helm charts and
// `kubectl stepwise version` read it.
const versionLabel = "app.kubernetes.io/version"

// installYAML renders config/default as `kubectl kustomize` does (the
// Namespace and CRDs first, the order `kubectl apply -k` applies in), with
// the manager image replaced by pinned. The tree is copied into memory,
// beside an overlay that sets the image, so nothing is written to it.
func installYAML(root, version, pinned string) ([]byte, error) {
	name, _, err := managerImage(root)
	if err != nil {
		return nil, err
	}
	repo, digest, ok := cutDigest(pinned)
	if !ok {
		return nil, fmt.Errorf("image %q is not pinned by digest", pinned)
	}
	mem := filesys.MakeFsInMemory()
	config := filepath.Join(root, "config")
	err = filepath.WalkDir(config, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(config, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join("/config", rel), data)
	})
	if err != nil {
		return nil, err
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../config/default
images:
- name: %s
  newName: %s
  digest: %s
`, name, repo, digest)
	if err := mem.WriteFile("/release/kustomization.yaml", []byte(overlay)); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified
	resMap, err := krusty.MakeKustomizer(opts).Run(mem, "/release")
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/default: %w", err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Stepwise %s: the objects of config/default, with the manager image\n"+
		"# pinned by digest. Install with: kubectl apply --server-side -f install.yaml\n", version)
	return append([]byte(header), out...), nil
}

var digestRef = regexp.MustCompile(`^([^@]+)@(sha256:[0-9a-f]{64})$`)

// cutDigest splits REPO@sha256:HEX.
func cutDigest(ref string) (repo, digest string, ok bool) {
	m := digestRef.FindStringSubmatch(ref)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// packageChart packages charts/stepwise as `helm package` does, with
// image.repository set to repo and image.digest to digest in values.yaml
// (its comments kept), every file stamped with created.
func packageChart(root, version, repo, digest string, created time.Time) ([]byte, error) {
	c, err := loader.LoadDir(filepath.Join(root, chartDir))
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", chartDir, err)
	}
	if c.Metadata.AppVersion != version {
		return nil, fmt.Errorf("%s has appVersion %s, not %s", chartDir, c.Metadata.AppVersion, version)
	}
	var values *common.File
	for _, f := range c.Raw {
		if f.Name == chartutil.ValuesfileName {
			values = f
		}
	}
	if values == nil {
		return nil, fmt.Errorf("%s has no %s", chartDir, chartutil.ValuesfileName)
	}
	if values.Data, err = pinValues(values.Data, repo, digest); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", chartDir, chartutil.ValuesfileName, err)
	}
	if c.Values, err = common.ReadValues(values.Data); err != nil {
		return nil, err
	}
	c.StampModTimes(created)
	tmp, err := os.MkdirTemp("", "stepwise-chart-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	path, err := chartutil.Save(c, tmp)
	if err != nil {
		return nil, fmt.Errorf("packaging %s: %w", chartDir, err)
	}
	if filepath.Base(path) != ChartArchive(version) {
		return nil, fmt.Errorf("helm packaged %s, want %s", filepath.Base(path), ChartArchive(version))
	}
	return os.ReadFile(path)
}

// The image block's repository and digest lines of values.yaml.
var (
	valuesRepository = regexp.MustCompile(`(?m)^(image:\n(?:(?:  .*|\s*#.*)?\n)*?  repository: ).*$`)
	valuesDigest     = regexp.MustCompile(`(?m)^(image:\n(?:(?:  .*|\s*#.*)?\n)*?  digest: ).*$`)
)

// pinValues sets image.repository and image.digest in the text of
// values.yaml, leaving every other line as it is.
func pinValues(data []byte, repo, digest string) ([]byte, error) {
	for _, r := range []struct {
		re    *regexp.Regexp
		value string
		what  string
	}{{valuesRepository, repo, "image.repository"}, {valuesDigest, fmt.Sprintf("%q", digest), "image.digest"}} {
		if n := len(r.re.FindAllIndex(data, -1)); n != 1 {
			return nil, fmt.Errorf("found %s %d times under the image block, want once", r.what, n)
		}
		data = r.re.ReplaceAll(data, []byte("${1}"+r.value))
	}
	return data, nil
}
