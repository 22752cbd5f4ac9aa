// Package proto holds the southbound protocol: one versioned protobuf
// package per server module (eim.onboarding.v1, eim.provisioning.v1,
// eim.host.v1). The .proto files are the source of truth; the Go code beside
// them is generated and committed, so a plain go build needs no generator.
//
// Regenerate with `go generate ./proto` (needs protoc, protoc-gen-go and
// protoc-gen-connect-go on PATH; see README.md).
package proto

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative eim/onboarding/v1/onboarding.proto eim/provisioning/v1/provisioning.proto eim/host/v1/host.proto
