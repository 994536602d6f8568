package image

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReleaseWorkflowPublishesWhatTheManifestsInstall checks the release
// workflow without running it: a v* tag builds with this package (make
// image-push, which runs hack/image) for amd64 and arm64 and pushes to the
// repository that config/manager installs from, tagged as the release.
func TestReleaseWorkflowPublishesWhatTheManifestsInstall(t *testing.T) {
	root := filepath.Join("..", "..")
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
	read := func(path string) string {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// The replace keeps YAML 1.1's "on" a string key.
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(read(".github/workflows/release.yaml"), "\non:", "\n\"on\":")), &wf); err != nil {
		t.Fatalf("release.yaml: %v", err)
	}
	if strings.Join(wf.On.Push.Tags, ",") != "v*" {
		t.Errorf("release.yaml runs on tags %v, want v*", wf.On.Push.Tags)
	}
	if wf.Permissions["packages"] != "write" {
		t.Errorf("release.yaml permissions %v: pushing to ghcr.io needs packages: write", wf.Permissions)
	}
	var push string
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			if strings.Contains(s.Run, "make image-push") {
				push = s.Run
			}
		}
	}
	kustomization := read("config/manager/kustomization.yaml")
	repo := regexp.MustCompile(`(?m)^- name: (\S+)$`).FindStringSubmatch(kustomization)
	if repo == nil {
		t.Fatal("config/manager/kustomization.yaml names no image")
	}
	if want := "make image-push IMAGE=" + repo[1] + ":${GITHUB_REF_NAME}"; !strings.Contains(push, want) {
		t.Errorf("release.yaml runs %q, want %q: the image config/manager installs", push, want)
	}
	makefile := read("Makefile")
	target := regexp.MustCompile(`(?m)^image-push:.*\n\tgo run \./hack/image (.*)$`).FindStringSubmatch(makefile)
	if target == nil || !strings.Contains(target[1], "--push $(IMAGE)") || !strings.Contains(target[1], "--platforms $(PLATFORMS)") {
		t.Fatalf("the Makefile's image-push does not run hack/image --platforms $(PLATFORMS) --push $(IMAGE): %v", target)
	}
	if !strings.Contains(makefile, "PLATFORMS ?= linux/amd64,linux/arm64") {
		t.Error("make image-push no longer builds linux/amd64 and linux/arm64")
	}
}
