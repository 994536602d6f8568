// Package podcache is the shape in which the manager's informer cache keeps
// Pods, and the controllers' reads of it.
//
// A cached Pod is a Record rather than a corev1.Pod: the corev1.Pod struct
// alone takes 1,240 bytes however little of it is kept, and the cache
// keeps every Pod Stepwise could drive (10,800 in make bench-scale), which
// made the Pods most of the manager's live heap. A Record holds the same
// values the cache transform keeps (internal/manager, trimPod) in about a
// third of that room. Controllers still see *corev1.Pod: Stores turns the
// records they read back into Pods (Record.Pod), one small allocation each,
// sharing the record's maps and slices.
//
// controller-runtime's cache reader cannot hand out a stored type other
// than the one asked for, so Pods are never read through the manager's
// client (a List of Pods through it fails); they are read through Stores,
// which holds the Pod informers' own indexers.
package podcache
