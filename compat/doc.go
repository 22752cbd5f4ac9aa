// Package compat holds EIM's drop-in compatibility suite: end-to-end tests
// that start the real server and drive it only through a Go client
// generated, with oapi-codegen, from the original EIM's OpenAPI document
// (../shared/reference/eim-openapi.yaml beside the repository), as a client
// written for the original would. Every response is decoded into the
// generated types; one a generated client cannot decode fails the test.
//
// The generated client is committed in refclient. Regenerate it with
//
//	go generate ./compat
//
// The generator is pinned as a tool dependency in go.mod; the document is
// taken as it is (OpenAPI 3.1, which oapi-codegen reads without
// conversion). TestClientIsFresh regenerates into a temporary directory and
// fails when the committed client differs.
package compat

//go:generate go tool oapi-codegen -config refclient/config.yaml ../../shared/reference/eim-openapi.yaml
