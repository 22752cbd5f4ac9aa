// Package compat holds EIM's drop-in compatibility suite: end-to-end tests
// that start the real server and drive it only through a Go client
// generated, with oapi-codegen, from the original EIM's OpenAPI document
// (../shared/reference/eim-openapi.yaml beside the repository), as a client
// written for the original would. Every response is decoded into the
// generated types; one a generated client cannot decode fails the test.
//
// The generated client is committed in refclient. The original cluster
// manager's v2 API (clusters and cluster templates) has its own client,
// clusterclient, generated the same way from that service's document
// (../shared/reference/cluster-manager-openapi.yaml, the file orch-cli
// carries); clusters_test.go drives the clusters module through it.
// Regenerate both with
//
//	go generate ./compat
//
// The generator is pinned as a tool dependency in go.mod; the documents
// are taken as they are (OpenAPI 3.1 and 3.0, which oapi-codegen reads
// without conversion). TestClientIsFresh regenerates each into a
// temporary directory and fails when a committed client differs.
package compat

//go:generate go tool oapi-codegen -config refclient/config.yaml ../../shared/reference/eim-openapi.yaml
//go:generate go tool oapi-codegen -config clusterclient/config.yaml ../../shared/reference/cluster-manager-openapi.yaml
