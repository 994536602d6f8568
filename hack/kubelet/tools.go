// Package main only anchors the kubelet's packages so that `go mod tidy`
// records every dependency; hack/node-assets.sh builds the real command from
// k8s.io/kubernetes/cmd/kubelet with this module's pinned requirements.
// It is a module of its own, next to hack/kube, so that the kubelet's extra
// dependencies never change what the control plane is built from.
package main

import (
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {}
