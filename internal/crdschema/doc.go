// Package crdschema validates Stepwise objects without a cluster, against
// the CRDs the project ships (config/crd), the way the API server does on
// create: unknown fields refused, defaults applied, then metadata, the
// OpenAPI schema, list types and the CEL rules (x-kubernetes-validations),
// with errors that name the field as the API server's do. It serves
// `kubectl stepwise plan -f`, where the CloneSet is a file in git that may
// not be applied yet.
package crdschema
