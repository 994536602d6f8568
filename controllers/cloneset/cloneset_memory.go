package cloneset

// memory is all the CloneSet controller keeps between rounds besides the
// informer caches and its metrics. None of it is the truth about a
// CloneSet (the API server's objects are): each item saves requests, or
// keeps a round from acting on a cache older than this process's own
// writes. A restart, or a new leader, starts with all of it empty, and
// each item says what that costs.
//
// The in-place engine (pkg/inplace) keeps one more memo of its own: the Pod
// versions whose in-place records it decoded and found settled. Lost, each
// Pod's records are decoded once more.
type memory struct {
	// expectations are this process's Pod writes the cache has not shown
	// yet; a round waits for them, so it never creates, deletes or moves a
	// Pod twice. Lost: a new process's cache starts from a list made after
	// every write of the old one, so nothing is left to wait for.
	expectations *expectations
	// statusWrites is each CloneSet's last status write until the cache
	// holds it, so a round starts from the status it wrote. Lost: one
	// status patch is refused with a conflict and written again from a
	// fresh read (patchStatus).
	statusWrites *statusWrites
	// gateWaits are the governed CloneSets whose Pod turned ready and wait
	// for a worker, so a long round of another CloneSet hands its worker
	// over. Lost: the work queue goes with it, and a new process reconciles
	// every CloneSet from its first list.
	gateWaits *gateWaits
}
