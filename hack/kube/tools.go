// Package main only anchors the control-plane packages so that `go mod tidy`
// records every dependency; the Makefile builds the real commands from
// k8s.io/kubernetes/cmd/... with this module's pinned requirements.
package main

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	// kubectl (k8s.io/kubernetes/cmd/kubectl) for make test-docs.
	_ "k8s.io/kubectl/pkg/cmd"
)

func main() {}
