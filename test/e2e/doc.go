// Package e2e holds end-to-end tests that run on a simulated cluster started
// by test/kwokcluster: kwokctl's binary runtime with a real scheduler,
// controller manager (garbage collection, EndpointSlices) and the kwok
// Stages of test/kwok/stages.yaml standing in for the kubelet. They need the
// binaries of `make test-assets` in bin/ (or $STEPWISE_BIN).
//
// The manager runs in-process with the shipped setup (internal/manager) and
// the shipped identity: a token of its ServiceAccount, with the RBAC of
// config/rbac installed on the cluster (test/shippedrbac), and leader
// election in stepwise-system. A rule missing from that RBAC fails these
// tests with 403s; fix the role, not the test.
package e2e
