// Package proto holds the southbound protocol: one versioned protobuf
// package per server module (eim.onboarding.v1, eim.provisioning.v1,
// eim.host.v1, eim.maintenance.v1, eim.cluster.v1, eim.workloads.v1). The .proto files are the source of truth; the Go code beside
// them is generated and committed, so a plain go build needs no generator.
//
// # Regenerating
//
// Install the pinned tools once with .ci/tools.sh (protoc 3.21.12 from
// Debian's protobuf-compiler, protoc-gen-go v1.36.12, protoc-gen-connect-go
// v1.21.1, buf v1.75.0; CI runs it too), then, with $(go env GOPATH)/bin on
// PATH:
//
//	go generate ./proto
//	go test ./proto
//
// The tests check that the committed code is what protoc generates now, run
// buf lint, and run buf breaking against released.binpb. They skip when a
// tool is missing, except in CI (CI=true or EIM_REQUIRE_TOOLS=1), where a
// missing tool fails.
//
// # The released protocol
//
// released.binpb holds the descriptors of the protocol as agents in the field
// speak it (taken at commit 9a3c429, before ReportActions). Every change must
// pass buf breaking against it under buf.yaml's rules (WIRE_JSON, and no
// package, service or RPC deleted): add fields, messages and RPCs; reserve
// the numbers and names of what you remove; put incompatible changes in a
// new package version (eim.provisioning.v2).
//
// Refresh it only when a protocol version is deliberately released, i.e. a
// release's agents speak what is at the release commit, and never to make
// a failing check pass. At that commit:
//
//	cd proto && buf build --exclude-source-info -o released.binpb
//
// and commit released.binpb on its own, saying which release it is.
package proto

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative eim/onboarding/v1/onboarding.proto eim/provisioning/v1/provisioning.proto eim/host/v1/host.proto eim/maintenance/v1/maintenance.proto eim/cluster/v1/cluster.proto eim/workloads/v1/workloads.proto
