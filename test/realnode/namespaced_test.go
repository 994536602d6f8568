package realnode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/config/rbac"
	"github.com/stepwise-dev/stepwise/test/harness"
)

// The namespaced install: the release's own namespace, the one namespace
// it is given, and another team's.
const (
	teamRelease = "stepwise-team-a"
	teamWatched = "team-a"
	teamOther   = "team-b"
)

// testNamespacedInstall installs Stepwise from the release's packaged Helm
// chart, with its default image (the one install.yaml pins), for one team,
// as a cluster admin would (rbac.namespaced, watchNamespaces: the team's
// namespace, metrics off): nothing but Roles is granted. With the
// cluster-wide manager stopped, the namespaced one runs a release in its
// namespace (a CloneSet and a Rollout whose analysis reads a bearer token
// Secret there); a CloneSet in another namespace is left alone for all
// that time; and the API server refuses the manager's ServiceAccount every
// verb of its rules in the other namespace and cluster-wide, as its
// authorizer says and as requests made with the ServiceAccount's own token
// show. The cluster-wide manager is put back at the end.
func testNamespacedInstall(t *testing.T, b *bed) {
	g := gomega.NewWithT(t)
	for _, ns := range []string{teamRelease, teamWatched, teamOther} {
		b.namespace(t, ns)
	}
	b.pauseClusterWideManager(t)

	objs := renderNamespacedChart(t, b.release.Chart)
	for _, u := range objs {
		if k := u.GetKind(); k == "ClusterRole" || k == "ClusterRoleBinding" {
			t.Fatalf("the namespaced chart renders %s %s", k, u.GetName())
		}
	}
	// The chart's default image is the one install.yaml pins.
	data, err := os.ReadFile(b.release.InstallYAML)
	if err != nil {
		t.Fatal(err)
	}
	pinned := managerImageOf(t, decodeManifests(t, data))
	if got := managerImageOf(t, objs); got != pinned {
		t.Fatalf("the packaged chart runs the manager from %s, install.yaml from %s", got, pinned)
	}
	began := time.Now()
	b.apply(t, objs)
	t.Cleanup(func() { b.deleteAll(t, objs) })
	b.waitManagerAvailable(t, teamRelease)
	t.Logf("namespaced manager available in %s", time.Since(began).Round(time.Millisecond))

	// Another team's CloneSet and Secret, there from before the release to
	// its end.
	token := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus-token"}, StringData: map[string]string{"token": "s3cret-" + ns}}
	}
	b.create(t, token(teamWatched), token(teamOther), demoCloneSet(teamOther, "web", "v1", 1, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))

	d := b.newDelivery(t, teamWatched, 2, []stepwisev1.RolloutStep{step("50%", 0), step("0", 0)}, func(ro *stepwisev1.Rollout) {
		ro.Spec.Analysis.Metrics[0].Prometheus.BearerTokenSecretRef = &stepwisev1.SecretKeyReference{Name: "prometheus-token", Key: "token"}
	})
	v2 := d.commit("v2")
	d.waitRollout("canary step with one Pod on v2", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.CurrentStepIndex).To(gomega.Equal(ptr.To[int32](0)))
		g.Expect(count(d.versions(g), "v2")).To(gomega.Equal(1))
	})
	// Promoted on measurements that sent the token: the Secret of the
	// watched namespace was read.
	d.waitRollout("v2 promoted", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(gomega.Equal(v2))
		g.Expect(count(d.versions(g), "v2")).To(gomega.Equal(2))
	})
	t.Logf("release in %s promoted %s after the namespaced install", teamWatched, time.Since(began).Round(time.Millisecond))

	// Left alone: no Pod, no status, no finalizer.
	cs := &stepwisev1.CloneSet{}
	g.Expect(b.client.Get(t.Context(), client.ObjectKey{Namespace: teamOther, Name: "web"}, cs)).To(gomega.Succeed())
	g.Expect(cs.Status.ObservedGeneration).To(gomega.BeZero(), "the CloneSet of %s was reconciled", teamOther)
	g.Expect(cs.Finalizers).To(gomega.BeEmpty())
	g.Expect(b.pods(g, teamOther)).To(gomega.BeEmpty(), "Pods created in %s", teamOther)

	b.expectRefusedOutside(t)

	pods := b.managerPodsIn(g, teamRelease)
	g.Expect(pods).To(gomega.HaveLen(1))
	g.Expect(containerStatus(&pods[0], "manager").RestartCount).To(gomega.BeZero(), "the namespaced manager restarted")
	g.Expect(containerStatus(&pods[0], "manager").ImageID).To(gomega.Equal(pinned), "the namespaced manager's imageID")
}

// renderNamespacedChart renders the release's packaged chart at path as
// `helm template --include-crds` does, into teamRelease, with its default
// image.
func renderNamespacedChart(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	chrt, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"rbac":            map[string]any{"namespaced": true},
		"watchNamespaces": []any{teamWatched},
		"metrics":         map[string]any{"enabled": false},
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "stepwise"
	install.Namespace = teamRelease
	install.IncludeCRDs = true
	install.Replace = true
	if install.KubeVersion, err = common.ParseKubeVersion("v1.37.2"); err != nil {
		t.Fatal(err)
	}
	releaser, err := install.Run(chrt, values)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	rel, ok := releaser.(*release.Release)
	if !ok {
		t.Fatalf("the install returned a %T", releaser)
	}
	return decodeManifests(t, []byte(rel.Manifest))
}

// pauseClusterWideManager scales the manager of config/default to zero,
// so that only the namespaced one acts, and back to one when the test
// ends.
func (b *bed) pauseClusterWideManager(t *testing.T) {
	t.Helper()
	key := client.ObjectKey{Namespace: managerNamespace, Name: "stepwise-manager"}
	scale := func(n int32) error {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
		return b.client.Patch(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
			client.RawPatch(types.MergePatchType, patch))
	}
	if err := b.client.Get(t.Context(), key, &appsv1.Deployment{}); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if err := scale(0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := scale(1); err != nil {
			t.Errorf("scaling the cluster-wide manager back: %v", err)
			return
		}
		b.waitManagerAvailable(t, managerNamespace)
	})
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		g.Expect(b.managerPods(g)).To(gomega.BeEmpty(), "cluster-wide manager Pods")
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed())
}

func (b *bed) managerPodsIn(g gomega.Gomega, namespace string) []corev1.Pod {
	var list corev1.PodList
	g.Expect(b.client.List(context.Background(), &list, client.InNamespace(namespace),
		client.MatchingLabels{"app.kubernetes.io/name": "stepwise", "app.kubernetes.io/component": "manager"})).To(gomega.Succeed())
	return list.Items
}

// deleteAll deletes what apply created, CRDs excepted (other subtests
// use them).
func (b *bed) deleteAll(t *testing.T, objs []*unstructured.Unstructured) {
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := b.client.Delete(context.Background(), u.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}

// expectRefusedOutside asks, as the namespaced manager's ServiceAccount,
// for what its rules grant in teamWatched, there, in teamOther and
// cluster-wide: the API server's authorizer (SubjectAccessReview) allows
// each rule in teamWatched only, and requests made with the
// ServiceAccount's own token are refused with 403 outside it.
func (b *bed) expectRefusedOutside(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	user := "system:serviceaccount:" + teamRelease + ":stepwise-manager"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + teamRelease, "system:authenticated"}
	allowed := func(verb, group, resource, ns string) bool {
		res, sub, _ := strings.Cut(resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: res, Subresource: sub, Namespace: ns},
		}}
		if err := b.client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	rules, err := rbac.ManagerRules()
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, r := range rules {
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					asked++
					if !allowed(verb, group, res, teamWatched) {
						t.Errorf("%s %s/%s denied in %s, the namespace it watches", verb, group, res, teamWatched)
					}
					for _, ns := range []string{teamOther, ""} {
						if allowed(verb, group, res, ns) {
							t.Errorf("%s %s/%s allowed in %q", verb, group, res, ns)
						}
					}
				}
			}
		}
	}
	t.Logf("the authorizer allows each of %d rules in %s only", asked, teamWatched)

	tr, err := b.Clientset.CoreV1().ServiceAccounts(teamRelease).CreateToken(ctx, "stepwise-manager", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(b.RESTConfig)
	cfg.BearerToken = tr.Status.Token
	asManager, err := harness.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The token works where the Role grants.
	if err := asManager.Get(ctx, client.ObjectKey{Namespace: teamWatched, Name: "prometheus-token"}, &corev1.Secret{}); err != nil {
		t.Fatalf("reading the Secret of %s as the manager: %v", teamWatched, err)
	}
	otherCloneSet := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Namespace: teamOther, Name: "web"}}
	otherPod := demoPod(teamOther)
	for what, call := range map[string]func() error{
		"get Secret " + teamOther + "/prometheus-token": func() error {
			return asManager.Get(ctx, client.ObjectKey{Namespace: teamOther, Name: "prometheus-token"}, &corev1.Secret{})
		},
		"list Secrets of every namespace": func() error { return asManager.List(ctx, &corev1.SecretList{}) },
		"list Pods of " + teamOther:       func() error { return asManager.List(ctx, &corev1.PodList{}, client.InNamespace(teamOther)) },
		"list Pods of every namespace":    func() error { return asManager.List(ctx, &corev1.PodList{}) },
		"watch Pods of " + teamOther: func() error {
			w, err := cs.CoreV1().Pods(teamOther).Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		},
		"create a Pod in " + teamOther: func() error { return asManager.Create(ctx, otherPod.DeepCopy()) },
		"get CloneSet " + teamOther + "/web": func() error {
			return asManager.Get(ctx, client.ObjectKeyFromObject(otherCloneSet), &stepwisev1.CloneSet{})
		},
		"list CloneSets of every namespace": func() error { return asManager.List(ctx, &stepwisev1.CloneSetList{}) },
		"patch the status of CloneSet " + teamOther + "/web": func() error {
			return asManager.Status().Patch(ctx, otherCloneSet.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"replicas":9}}`)))
		},
		"list Rollouts of " + teamOther: func() error {
			return asManager.List(ctx, &stepwisev1.RolloutList{}, client.InNamespace(teamOther))
		},
		"list Namespaces": func() error { return asManager.List(ctx, &corev1.NamespaceList{}) },
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as the namespaced manager: %v, want 403 Forbidden", what, err)
		}
	}
}

// demoPod is a bare Pod of the demo image, which the manager must not be
// able to create outside its namespace.
func demoPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intruder"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: DemoImage + ":v1", ImagePullPolicy: corev1.PullNever}}},
	}
}
