package release

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReleaseWorkflowReleasesWhatWasTested checks the release workflow
// without running it: on a v* tag it runs the tests, then `make release`
// for the tag, pushes the image index of dist/ and attaches dist/ to the
// GitHub release, in that order; it may write both; and releases push to
// the repository that config/manager installs from.
func TestReleaseWorkflowReleasesWhatWasTested(t *testing.T) {
	read := func(path string) string {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	var wf struct {
		On struct {
			Push struct {
				Tags []string `json:"tags"`
			} `json:"push"`
		} `json:"on"`
		Permissions map[string]string `json:"permissions"`
		Jobs        map[string]struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	// The replace keeps YAML 1.1's "on" a string key.
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(read(".github/workflows/release.yaml"), "\non:", "\n\"on\":")), &wf); err != nil {
		t.Fatalf("release.yaml: %v", err)
	}
	if strings.Join(wf.On.Push.Tags, ",") != "v*" {
		t.Errorf("release.yaml runs on tags %v, want v*", wf.On.Push.Tags)
	}
	if wf.Permissions["packages"] != "write" || wf.Permissions["contents"] != "write" {
		t.Errorf("release.yaml permissions %v: pushing to ghcr.io needs packages: write, a GitHub release contents: write", wf.Permissions)
	}
	if len(wf.Jobs) != 1 {
		t.Fatalf("release.yaml has %d jobs, want one: the steps below share dist/", len(wf.Jobs))
	}
	var runs []string
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			runs = append(runs, s.Run)
		}
	}
	at := func(what string) int {
		i := slices.IndexFunc(runs, func(r string) bool { return strings.Contains(r, what) })
		if i < 0 {
			t.Errorf("release.yaml has no step running %q", what)
		}
		return i
	}
	order := []int{at(".ci/run"), at(`make release VERSION="${GITHUB_REF_NAME}"`), at("make release-push"), at("gh release create")}
	if !slices.IsSorted(order) {
		t.Errorf("release.yaml runs the tests, make release, make release-push and gh release at steps %v: want that order", order)
	}
	if i := order[3]; i >= 0 && !strings.Contains(runs[i], "dist") {
		t.Errorf("gh release attaches no file of dist/: %q", runs[i])
	}
	if ci := read(".ci/run"); !regexp.MustCompile(`(?m)^make test$`).MatchString(ci) {
		t.Error(".ci/run no longer runs make test")
	}

	makefile := read("Makefile")
	push := regexp.MustCompile(`(?m)^release-push:.*\n\t\$\(call RELEASE_TOOL,stepwise-release,release\) (.*)$`).FindStringSubmatch(makefile)
	if push == nil || !strings.Contains(push[1], "--push") {
		t.Errorf("the Makefile's release-push does not run hack/release --push: %v", push)
	}
	repo := regexp.MustCompile(`(?m)^IMAGE_REPO \?= (\S+)$`).FindStringSubmatch(makefile)
	name, _, err := managerImage(root)
	if err != nil {
		t.Fatal(err)
	}
	if repo == nil || repo[1] != name || name != Repository {
		t.Errorf("make release pushes to %v, config/manager installs %s, hack/release names %s: want one repository", repo, name, Repository)
	}
}
