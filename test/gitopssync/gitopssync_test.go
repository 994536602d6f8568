package gitopssync

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	cloneSetPath = "apps/web/cloneset.yaml"
	rolloutPath  = "apps/web/rollout.yaml"
)

func cloneSetYAML(image, partition string) string {
	s := "apiVersion: stepwise.dev/v1alpha1\nkind: CloneSet\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 5\n" +
		"  template:\n    spec:\n      containers:\n        - name: app\n          image: " + image + "\n" +
		"  updateStrategy:\n    type: InPlaceIfPossible\n"
	if partition != "" {
		s += "    partition: " + partition + "\n"
	}
	return s
}

func checkout(t *testing.T, r *Repo) map[string]string {
	t.Helper()
	snap, err := r.Checkout("apps")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for p, b := range snap.Files {
		out[p] = string(b)
	}
	return out
}

func TestRepoRevertRestoresTheParentsFiles(t *testing.T) {
	r, err := NewRepo()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit("web 1.0.0", map[string]string{cloneSetPath: cloneSetYAML("app:1.0.0", ""), "README.md": "not applied\n"}); err != nil {
		t.Fatal(err)
	}
	bad, err := r.Commit("web 1.1.0-bad, with a rollout", map[string]string{cloneSetPath: cloneSetYAML("app:1.1.0-bad", ""), rolloutPath: "kind: Rollout\n"})
	if err != nil {
		t.Fatal(err)
	}
	revert, err := r.Revert(bad)
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	if head != revert {
		t.Fatalf("HEAD is %s, want the revert %s", head, revert)
	}
	if got, want := r.Message(revert), `Revert "web 1.1.0-bad, with a rollout"`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	files := checkout(t, r)
	if len(files) != 1 || files[cloneSetPath] != cloneSetYAML("app:1.0.0", "") {
		t.Errorf("after the revert apps/ holds %v, want only the 1.0.0 CloneSet", files)
	}

	// Reverting the revert brings the bad release back, rollout included.
	if _, err := r.Revert(revert); err != nil {
		t.Fatal(err)
	}
	if files := checkout(t, r); files[cloneSetPath] != cloneSetYAML("app:1.1.0-bad", "") || files[rolloutPath] != "kind: Rollout\n" {
		t.Errorf("after reverting the revert apps/ holds %v", files)
	}
}

func TestRepoRevertRefusesWhatALaterCommitChanged(t *testing.T) {
	r, err := NewRepo()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit("1.0.0", map[string]string{cloneSetPath: cloneSetYAML("app:1.0.0", "")}); err != nil {
		t.Fatal(err)
	}
	second, err := r.Commit("1.1.0", map[string]string{cloneSetPath: cloneSetYAML("app:1.1.0", "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit("1.2.0", map[string]string{cloneSetPath: cloneSetYAML("app:1.2.0", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revert(second); !errors.Is(err, ErrRevertConflict) {
		t.Fatalf("Revert = %v, want ErrRevertConflict", err)
	}
}

func TestObjectsReadsManifestsInPathOrder(t *testing.T) {
	snap := Snapshot{Files: map[string][]byte{
		"apps/web/b.yaml":   []byte(cloneSetYAML("app:1", "")),
		"apps/web/a.yml":    []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: shop}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: two, namespace: shop}\n"),
		"apps/web/notes.md": []byte("# not a manifest"),
	}}
	objs, err := objects(snap)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, key(o))
	}
	if want := "ConfigMap/one ConfigMap/two CloneSet/web"; strings.Join(got, " ") != want {
		t.Errorf("objects %v, want %s", got, want)
	}

	snap.Files["apps/ns.yaml"] = []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")
	if _, err := objects(snap); err == nil {
		t.Error("a Namespace was accepted; ApplyAllStaged would need a status poller for it")
	}
}

func mustObject(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// live is what the API server holds after applying manifest: the manifest
// with its last-applied annotation, then the partition the Rollout
// controller wrote ("" for none).
func live(t *testing.T, manifest, partition string) *unstructured.Unstructured {
	t.Helper()
	u, err := withLastApplied(mustObject(t, manifest))
	if err != nil {
		t.Fatal(err)
	}
	if partition != "" {
		if err := unstructured.SetNestedField(u.Object, partition, "spec", "updateStrategy", "partition"); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// partitionIn returns what a merge patch does to the partition: "absent",
// "null" (deletes it) or the value it sets.
func partitionIn(t *testing.T, patch []byte) string {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatal(err)
	}
	v, found, err := unstructured.NestedFieldNoCopy(p, "spec", "updateStrategy", "partition")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !found:
		return "absent"
	case v == nil:
		return "null"
	}
	return v.(string)
}

// The three-way merge patch decides what client-side apply does to a field
// another writer owns: these are the cases the e2e tests meet.
func TestThreeWayPatchAndThePartition(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		lastApplied, git, partition string
		ignore                      bool
		want                        string
	}{
		{name: "never in git: left alone", lastApplied: cloneSetYAML("app:1", ""), git: cloneSetYAML("app:2", ""), partition: "60%", want: "absent"},
		{name: "set in git: written back", lastApplied: cloneSetYAML("app:1", "'100%'"), git: cloneSetYAML("app:1", "'100%'"), partition: "60%", want: "100%"},
		{name: "dropped from git: deleted", lastApplied: cloneSetYAML("app:1", "'100%'"), git: cloneSetYAML("app:1", ""), partition: "60%", want: "null"},
		{name: "set in git, ignored and respected: live value kept", lastApplied: cloneSetYAML("app:1", "'100%'"), git: cloneSetYAML("app:2", "'100%'"), partition: "60%", ignore: true, want: "absent"},
		{name: "dropped from git, ignored and respected: live value kept", lastApplied: cloneSetYAML("app:1", "'100%'"), git: cloneSetYAML("app:1", ""), partition: "60%", ignore: true, want: "absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := live(t, tc.lastApplied, tc.partition)
			desired := mustObject(t, tc.git)
			if tc.ignore {
				if err := keepLive(desired, l, []string{"/spec/updateStrategy/partition"}); err != nil {
					t.Fatal(err)
				}
			}
			patch, err := threeWayPatch(l, desired)
			if err != nil {
				t.Fatal(err)
			}
			if got := partitionIn(t, patch); got != tc.want {
				t.Errorf("partition in patch %s: %s, want %s", patch, got, tc.want)
			}
		})
	}
}

func TestThreeWayPatchIsEmptyWhenInSync(t *testing.T) {
	manifest := cloneSetYAML("app:1", "")
	patch, err := threeWayPatch(live(t, manifest, "100%"), mustObject(t, manifest))
	if err != nil {
		t.Fatal(err)
	}
	if !isEmptyPatch(patch) {
		t.Errorf("patch %s, want {} for an object that only gained a partition", patch)
	}
}
