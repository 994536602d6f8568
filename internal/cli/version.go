package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ManagerSelector finds the manager's Deployment: config/default and the
// Helm chart both label it so (charts/stepwise/templates/_helpers.tpl).
const ManagerSelector = "app.kubernetes.io/name=stepwise,app.kubernetes.io/component=manager"

// DefaultManagerNamespace is where config/default installs the manager;
// version looks there when it may not list Deployments cluster-wide.
const DefaultManagerNamespace = "stepwise-system"

// Build is how this plugin binary was built.
type Build struct {
	// Version is the release (v0.2.0), or "(devel)" for a build from a
	// checkout.
	Version string
	// Revision is the commit, when the build recorded it.
	Revision string
	// Modified is true when the checkout had uncommitted changes.
	Modified  bool
	GoVersion string
}

// PluginBuild says how this binary was built. linked is the version the
// release build sets with -ldflags "-X .../internal/version.Version=..."; without it, the
// module version that go install records (v0.2.0 for
// `go install .../cmd/kubectl-stepwise@v0.2.0`) is used.
func PluginBuild(linked string, info *debug.BuildInfo) Build {
	b := Build{Version: linked}
	if info == nil {
		if b.Version == "" {
			b.Version = "(unknown)"
		}
		return b
	}
	b.GoVersion = info.GoVersion
	if b.Version == "" {
		b.Version = info.Main.Version
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func (b Build) String() string {
	var extra []string
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if b.Modified {
			rev += ", modified"
		}
		extra = append(extra, "revision "+rev)
	}
	if b.GoVersion != "" {
		extra = append(extra, b.GoVersion)
	}
	if len(extra) == 0 {
		return b.Version
	}
	return b.Version + " (" + strings.Join(extra, ", ") + ")"
}

// Manager is one manager Deployment found in the cluster.
type Manager struct {
	Namespace, Name string
	// Version is the Deployment's app.kubernetes.io/version label (the
	// chart sets it), else the tag of its image; empty when neither says
	// (an image pinned by digest alone).
	Version string
	// Image is the manager container's image as the Deployment names it.
	Image string
	// Ready and Replicas are the Deployment's ready and desired Pods.
	Ready, Replicas int64
}

// FindManagers lists the manager Deployments. namespace "" looks in every
// namespace, and falls back on DefaultManagerNamespace when listing them
// all is forbidden, as it is to a user with only namespaced roles.
func FindManagers(ctx context.Context, dyn dynamic.Interface, namespace string) ([]Manager, error) {
	deployments := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"})
	opts := metav1.ListOptions{LabelSelector: ManagerSelector}
	list, err := deployments.Namespace(namespace).List(ctx, opts)
	if namespace == "" && apierrors.IsForbidden(err) {
		namespace = DefaultManagerNamespace
		list, err = deployments.Namespace(namespace).List(ctx, opts)
	}
	if err != nil {
		where := "any namespace"
		if namespace != "" {
			where = "namespace " + namespace
		}
		return nil, fmt.Errorf("looking for the manager Deployment (%s) in %s: %w", ManagerSelector, where, err)
	}
	out := make([]Manager, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, managerOf(&list.Items[i]))
	}
	return out, nil
}

func managerOf(u *unstructured.Unstructured) Manager {
	m := Manager{Namespace: u.GetNamespace(), Name: u.GetName(), Version: u.GetLabels()["app.kubernetes.io/version"], Replicas: 1}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for i, c := range containers {
		c, _ := c.(map[string]any)
		name, _ := c["name"].(string)
		if image, _ := c["image"].(string); i == 0 || name == "manager" {
			m.Image = image
		}
	}
	if m.Version == "" {
		m.Version = v1alpha1.ImageTag(m.Image)
	}
	if n, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found {
		m.Replicas = n
	}
	m.Ready, _, _ = unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	return m
}

// WriteVersions prints the plugin's version and, unless managers is nil,
// each manager's, and says when they differ: the plugin validates files
// against the CRDs of its own release.
func WriteVersions(w io.Writer, plugin Build, managers []Manager, namespace string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Plugin:   %s\n", plugin)
	if managers != nil && len(managers) == 0 {
		where := "any namespace"
		if namespace != "" {
			where = "namespace " + namespace
		}
		fmt.Fprintf(&b, "Manager:  not found (no Deployment labelled %s in %s)\n", ManagerSelector, where)
	}
	for _, m := range managers {
		version := m.Version
		if version == "" {
			version = "unknown"
		}
		fmt.Fprintf(&b, "Manager:  %s (%s/%s, image %s, %d/%d ready)\n", version, m.Namespace, m.Name, m.Image, m.Ready, m.Replicas)
		if m.Version != "" && strings.HasPrefix(plugin.Version, "v") && m.Version != plugin.Version {
			fmt.Fprintf(&b, "Warning:  the plugin is %s and the manager %s: plan -f and lint check files against the plugin's CRDs; use the plugin of the release you run\n",
				plugin.Version, m.Version)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
