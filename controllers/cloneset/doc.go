// Package cloneset reconciles CloneSets: it keeps one ControllerRevision per
// distinct Pod template, creates and deletes Pods to match replicas, and moves
// Pods between revisions (in place through pkg/inplace where it can).
//
// A reconcile fetches, asks the pure planner in ./plan what to do, applies
// that plan, and writes status once at the end. No state lives in memory
// except expectations, which only prevent acting on a cache that has not yet
// seen this controller's own writes.
package cloneset
