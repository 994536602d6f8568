package inplace

import (
	"testing"
	"time"
)

// Pending must answer what Refresh then does, at every stage of an update
// with a grace period, and write nothing itself.
func TestPendingForetellsRefresh(t *testing.T) {
	oldT := template(container("app", "nginx:1.25"))
	newT := template(container("app", "nginx:1.26"))
	e, f, clk := newEngine(t, newPod(oldT.Spec.Containers...))
	update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{GracePeriodSeconds: 10})

	step := func(at time.Duration, wantWrites bool, wantDelay time.Duration, kubelet func()) {
		t.Helper()
		clk.SetTime(epoch.Add(at))
		if kubelet != nil {
			kubelet()
		}
		status, spec := f.countWrites()
		writes, delay := e.Pending(f.get("web-0"))
		expectWrites(t, f, status, spec)
		if writes != wantWrites || delay != wantDelay {
			t.Fatalf("at %v: Pending = %v, %v; want %v, %v", at, writes, delay, wantWrites, wantDelay)
		}
		refresh(t, e, f)
		after, afterSpec := f.countWrites()
		if wrote := after+afterSpec > status+spec; wrote != wantWrites {
			t.Fatalf("at %v: Refresh wrote = %v, Pending said %v", at, wrote, wantWrites)
		}
	}
	step(4*time.Second, false, 6*time.Second, nil)                                        // grace runs
	step(11*time.Second, true, 0, nil)                                                    // grace over: the image patch
	step(12*time.Second, false, 0, nil)                                                   // the kubelet has not restarted it yet
	step(13*time.Second, true, 0, func() { f.kubeletRestart("web-0", true, newImageID) }) // the gate back to True
	step(14*time.Second, false, 0, func() { f.kubeletSync("web-0") })                     // idle
}
