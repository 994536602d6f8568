//go:build tools

// Package main only anchors Traefik's command so that `go mod tidy` records
// every dependency; hack/node-assets.sh builds the real command,
// github.com/traefik/traefik/v3/cmd/traefik, with this module's pinned
// requirements. The build tag keeps this file out of every build.
package main

import (
	_ "github.com/traefik/traefik/v3/cmd/traefik"
)
