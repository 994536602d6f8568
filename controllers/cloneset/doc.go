// Package cloneset reconciles CloneSets: it keeps one ControllerRevision per
// distinct Pod template, creates and deletes Pods to match replicas, and moves
// Pods between revisions (in place through pkg/inplace where it can).
//
// A reconcile fetches, asks the pure planner in ./plan what to do, applies
// that plan, and writes status once at the end. Besides the informer caches,
// what the controller keeps in memory is listed in one place, memory
// (cloneset_memory.go), each item with what losing it on a restart costs:
// never a wrong decision, at most a few requests more.
package cloneset
