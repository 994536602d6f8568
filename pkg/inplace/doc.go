// Package inplace updates the containers of a running Pod without recreating
// it: same name, UID, IP, node and volumes; kubelet restarts only the
// containers whose image changed.
//
// Three records on the Pod, each with one job:
//   - the Pod spec is what we want (the images kubelet must run);
//   - the annotation stepwise.dev/inplace-update-state is how far we got
//     (State), so a restarted controller resumes instead of starting over;
//   - the condition InPlaceUpdateReady is how the world should see the Pod:
//     every CloneSet Pod carries it as a readiness gate, so False takes the
//     Pod out of Service endpoints while its containers restart (the write
//     that sets it False sets Ready False too, ahead of the kubelet).
//
// The package offers three verbs (Interface): CanUpdateInPlace (pure),
// Update (start moving a Pod to a revision) and Refresh (called every
// reconcile; advances grace periods and container batches and flips the
// condition back to True when done). A plain image update costs three
// writes: condition False, one spec write, condition True.
//
// The diff between two templates (CalculateSpec), image comparison and the
// planning of each write are pure functions; API access goes through the
// small PodClient adapter.
//
// # Stability
//
// This package is for other programs to import. While Stepwise's API is
// v1alpha1, an exported name may change in a minor release; every such
// change is in the CHANGELOG. It imports nothing of Stepwise's but the API
// types and its own subpackages (docs/architecture.md).
package inplace
