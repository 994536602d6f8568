package podcache

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// keptPod is a Pod as the cache transform leaves it.
func keptPod(namespace, name string, owner types.UID, labelSet map[string]string) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 2,
			Labels: labelSet, Annotations: map[string]string{"stepwise.dev/inplace-update-state": `{"revision":"web-2"}`},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web", UID: owner, Controller: ptr.To(true)}},
			DeletionTimestamp: ptr.To(metav1.Unix(100, 0)), Finalizers: []string{"example.com/hold"},
		},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "InPlaceUpdateReady"}},
			InitContainers: []corev1.Container{{Name: "proxy", Image: "proxy:1", RestartPolicy: &always}},
			Containers:     []corev1.Container{{Name: "app", Image: "web:2"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, Reason: "Evicted", Message: "node pressure",
			Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(50, 0)}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Image: "proxy:1", ImageID: "sha256:bb", Ready: true}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "web:2", ImageID: "sha256:aa", ContainerID: "containerd://1",
				Ready: true, Started: ptr.To(true), RestartCount: 1,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(40, 0)}}}},
		},
	}
}

// Stores keeps the indexers of Pod informers only, reads every one of
// them (one per namespace with --watch-namespaces), and finds a Pod by its
// controller's UID or by namespace and selector.
func TestStoresReadEveryPodInformer(t *testing.T) {
	stores := NewStores()
	nsIndex := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	shop := stores.NewInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, nsIndex)
	blog := stores.NewInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	revisions := stores.NewInformer(&toolscache.ListWatch{}, &appsv1.ControllerRevision{}, 0, toolscache.Indexers{})
	if _, ok := revisions.GetIndexer().GetIndexers()[ControllerIndex]; ok {
		t.Error("a ControllerRevision informer got the Pod controller index")
	}
	if len(nsIndex) != 1 {
		t.Errorf("the caller's indexers were changed: %v", nsIndex)
	}
	if n := len(stores.indexers); n != 2 {
		t.Fatalf("stores keep %d indexers, want the 2 Pod informers'", n)
	}
	web := map[string]string{"app": "web"}
	add := func(inf toolscache.SharedIndexInformer, obj any) {
		t.Helper()
		if err := inf.GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(shop, (keptPod("shop", "web-0", "cs-shop", web)))
	add(shop, (keptPod("shop", "web-1", "cs-shop", web)))
	add(shop, (keptPod("shop", "db-0", "sts-shop", map[string]string{"app": "db"})))
	add(blog, (keptPod("blog", "web-0", "cs-blog", web)))
	names := func(pods []*corev1.Pod, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range pods {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		name string
		got  []string
		want []string
	}{
		{"by controller", names(stores.Controlled("cs-shop", labels.Everything())), []string{"shop/web-0", "shop/web-1"}},
		{"by controller, in the other namespace's informer", names(stores.Controlled("cs-blog", labels.Everything())), []string{"blog/web-0"}},
		{"by controller and selector", names(stores.Controlled("cs-shop", labels.SelectorFromSet(map[string]string{"app": "db"}))), nil},
		{"by namespace", names(stores.List("shop", labels.Everything())), []string{"shop/db-0", "shop/web-0", "shop/web-1"}},
		{"by namespace and selector", names(stores.List("blog", labels.SelectorFromSet(web))), []string{"blog/web-0"}},
		{"a namespace without Pods", names(stores.List("other", labels.Everything())), nil},
	} {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// A Pod is keyed by its controller's UID only: an owner that is not its
// controller, or no owner, gives no key.
func TestControllerIndexKeys(t *testing.T) {
	owned := keptPod("shop", "web-0", "cs-1", nil)
	merelyOwned := keptPod("shop", "web-1", "cs-1", nil)
	merelyOwned.OwnerReferences[0].Controller = ptr.To(false)
	bare := keptPod("shop", "web-2", "", nil)
	bare.OwnerReferences = nil
	for _, tt := range []struct {
		name string
		obj  any
		want []string
	}{
		{"a Pod is keyed by its controller's UID", owned, []string{"cs-1"}},
		{"a Pod another object merely owns is no key", merelyOwned, nil},
		{"a bare Pod has no key", bare, nil},
		{"what is not an object has no key", "shop/web-3", nil},
	} {
		got, err := byController(tt.obj)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: key %v (%v), want %v", tt.name, got, err, tt.want)
		}
	}
}
