// Package apitest runs kubectl-stepwise's command lines in-process against a
// real kube-apiserver and etcd (envtest, binaries from bin/) with the
// Stepwise CRDs installed. No controller runs: the tests write the status a
// controller would, which is exactly what the plugin reads.
package apitest
