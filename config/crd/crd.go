// Package crd ships the CRDs that `make manifests` writes to bases/, so that
// a Go program (kubectl stepwise plan -f) can validate objects offline
// against exactly the schema the API server is given.
package crd

import "embed"

// Bases holds bases/*.yaml, one CustomResourceDefinition per file.
//
//go:embed bases/*.yaml
var Bases embed.FS
