// Package api holds EIM's own OpenAPI 3.1 document of the northbound REST
// API (the one package httpapi serves), embedded so that the server can
// serve it at GET /openapi.yaml and tools can read it from the binary.
//
// openapi.yaml is generated; do not edit it. Change api/internal/spec (paths,
// limits, descriptions) or the domain types in the root package (fields),
// then run
//
//	go generate ./api
//
// A test fails when the committed file differs from what the generator
// produces.
package api

import _ "embed"

//go:generate go run ./internal/gen -o openapi.yaml

//go:embed openapi.yaml
var spec []byte

// Spec returns the OpenAPI document (YAML). The caller must not modify it.
func Spec() []byte { return spec }
