// Package e2e holds end-to-end tests that run on a simulated cluster started
// by test/kwokcluster: kwokctl's binary runtime with a real scheduler,
// controller manager (garbage collection, EndpointSlices) and the kwok
// Stages of test/kwok/stages.yaml standing in for the kubelet. They need the
// binaries of `make test-assets` in bin/ (or $STEPWISE_BIN).
package e2e
