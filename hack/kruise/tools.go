// Package main only anchors OpenKruise's manager packages so that `go mod tidy`
// records every dependency; hack/test-assets.sh builds the real command, the
// module root github.com/openkruise/kruise, with this module's requirements.
// It is built for the benchmark (make bench-compare) only.
package main

import (
	_ "github.com/openkruise/kruise/pkg/controller"
	_ "github.com/openkruise/kruise/pkg/webhook"
)

func main() {}
