package cloneset

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestStatusWritesCatchTheCacheUpWithOurLastWrite(t *testing.T) {
	cached := func(rv string, uid types.UID, ready int32) *stepwisev1.CloneSet {
		return &stepwisev1.CloneSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: uid, ResourceVersion: rv},
			Status:     stepwisev1.CloneSetStatus{ReadyReplicas: ready},
		}
	}
	written := func(w *statusWrites) {
		// A patch over version 10 produced version 11 with 3 ready.
		w.record(cached("11", "u1", 3), "10")
	}

	t.Run("a cache one write behind starts from the write", func(t *testing.T) {
		w := newStatusWrites()
		written(w)
		cs := cached("10", "u1", 2)
		if !w.catchUp(cs) {
			t.Fatal("catchUp = false for the version our write went over")
		}
		if cs.ResourceVersion != "11" || cs.Status.ReadyReplicas != 3 {
			t.Errorf("caught up to version %s with %d ready, want 11 with 3", cs.ResourceVersion, cs.Status.ReadyReplicas)
		}
		// The record stays while the cache is behind, and hands out copies.
		cs.Status.ReadyReplicas = 9
		again := cached("10", "u1", 2)
		if !w.catchUp(again) || again.Status.ReadyReplicas != 3 {
			t.Errorf("second catchUp: %d ready, want 3 (the record must not share its status)", again.Status.ReadyReplicas)
		}
	})

	for name, cs := range map[string]*stepwisev1.CloneSet{
		"a cache that saw the write":       cached("11", "u1", 3),
		"a cache that saw a later write":   cached("12", "u1", 4),
		"a CloneSet deleted and recreated": cached("10", "u2", 0),
	} {
		t.Run(name+" is left alone and the record dropped", func(t *testing.T) {
			w := newStatusWrites()
			written(w)
			before := cs.DeepCopy()
			if w.catchUp(cs) {
				t.Errorf("catchUp = true, want false")
			}
			if cs.ResourceVersion != before.ResourceVersion || cs.Status.ReadyReplicas != before.Status.ReadyReplicas {
				t.Errorf("cs changed to version %s, status %+v", cs.ResourceVersion, cs.Status)
			}
			if w.catchUp(cached("10", "u1", 2)) {
				t.Error("the record outlived a cache that moved past it")
			}
		})
	}

	t.Run("a deleted CloneSet is forgotten", func(t *testing.T) {
		w := newStatusWrites()
		written(w)
		w.forget(types.NamespacedName{Namespace: "ns", Name: "web"})
		if w.catchUp(cached("10", "u1", 2)) || len(w.bySet) != 0 {
			t.Error("forget kept the record")
		}
	})
}
