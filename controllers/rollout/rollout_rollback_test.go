package rollout

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/controllers/rollout/rollback"
)

func TestDeletedCanariesSettle(t *testing.T) {
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	other := types.NamespacedName{Namespace: "shop", Name: "api"}
	for _, tc := range []struct {
		name    string
		deleted []types.UID
		// pods as the cache shows them: name -> terminating
		pods []rollback.Pod
		// terminating is what the plan must read of each Pod, by name.
		terminating map[string]bool
		// remembered is what is still remembered after the round.
		remembered []types.UID
	}{{
		name:        "nothing deleted: the Pods as the cache shows them",
		pods:        []rollback.Pod{{Name: "web-1", UID: "a"}, {Name: "web-2", UID: "b", Terminating: true}},
		terminating: map[string]bool{"web-1": false, "web-2": true},
	}, {
		name:        "a deleted Pod the cache still shows alive reads terminating, and is remembered",
		deleted:     []types.UID{"b"},
		pods:        []rollback.Pod{{Name: "web-1", UID: "a"}, {Name: "web-2", UID: "b"}},
		terminating: map[string]bool{"web-1": false, "web-2": true},
		remembered:  []types.UID{"b"},
	}, {
		name:        "the cache shows the deletion: forgotten",
		deleted:     []types.UID{"b"},
		pods:        []rollback.Pod{{Name: "web-2", UID: "b", Terminating: true}},
		terminating: map[string]bool{"web-2": true},
	}, {
		name:        "recreated under the same name: the new Pod is another Pod, and the old one is forgotten",
		deleted:     []types.UID{"b"},
		pods:        []rollback.Pod{{Name: "web-2", UID: "c"}},
		terminating: map[string]bool{"web-2": false},
	}, {
		name:        "of two deleted, one shown gone: the other stays",
		deleted:     []types.UID{"b", "d"},
		pods:        []rollback.Pod{{Name: "web-3", UID: "d"}},
		terminating: map[string]bool{"web-3": true},
		remembered:  []types.UID{"d"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var d deletedCanaries
			for _, uid := range tc.deleted {
				d.deleted(web, uid)
			}
			d.deleted(other, "b")
			d.settle(web, tc.pods)
			for _, p := range tc.pods {
				if p.Terminating != tc.terminating[p.Name] {
					t.Errorf("%s: terminating = %v, want %v", p.Name, p.Terminating, tc.terminating[p.Name])
				}
			}
			if got := len(d.byRollout[web]); got != len(tc.remembered) {
				t.Errorf("remembered %d Pods (%v), want %v", got, d.byRollout[web], tc.remembered)
			}
			for _, uid := range tc.remembered {
				if _, ok := d.byRollout[web][uid]; !ok {
					t.Errorf("%s forgotten, want it remembered", uid)
				}
			}
			if _, ok := d.byRollout[other]["b"]; !ok {
				t.Error("another Rollout's deletion was forgotten")
			}
			d.forget(web)
			if _, ok := d.byRollout[web]; ok {
				t.Error("forget left the Rollout's deletions")
			}
		})
	}
}
