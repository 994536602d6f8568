package cloneset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestExpectationsWaitForOwnWritesThenLetGo(t *testing.T) {
	now := time.Unix(1_780_000_000, 0)
	e := newExpectations(func() time.Time { return now })
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	pod := func(name, resourceVersion string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: resourceVersion}}
	}
	cached := map[string]*corev1.Pod{"web-a": pod("web-a", "10"), "web-b": pod("web-b", "11")}

	e.expectCreate(key, "web-c")
	e.expectDelete(key, "web-a")
	e.expectResourceVersion(key, "web-b", "15")
	if ok, waiting := e.satisfied(key, cached); ok || len(waiting) != 3 {
		t.Fatalf("satisfied before the cache saw any write = %v, waiting %v; want false, 3 awaited", ok, waiting)
	}

	cached["web-c"] = pod("web-c", "12")
	cached["web-a"].DeletionTimestamp = &metav1.Time{Time: now}
	if ok, waiting := e.satisfied(key, cached); ok || len(waiting) != 1 || waiting[0] != "update web-b" {
		t.Fatalf("satisfied with the update unseen = %v, waiting %v; want false, [update web-b]", ok, waiting)
	}

	cached["web-b"] = pod("web-b", "15")
	if ok, waiting := e.satisfied(key, cached); !ok {
		t.Fatalf("satisfied with every write seen = false, waiting %v", waiting)
	}
	if _, held := e.bySet[key]; held {
		t.Error("a CloneSet with nothing awaited keeps its expectation maps, and the room they grew to")
	}

	e.expectCreate(key, "web-d")
	now = now.Add(expectationTimeout + time.Second)
	if ok, waiting := e.satisfied(key, cached); !ok {
		t.Errorf("satisfied after the timeout = false, waiting %v: a lost watch event must not hold the CloneSet forever", waiting)
	}
}
