#!/usr/bin/env bash
# Installs the protobuf tooling that proto/ is generated and checked with, at
# the versions the committed code was generated with. Idempotent: on a
# machine that has them it only checks versions (well under a second). The
# first run builds buf from source, which takes a few minutes.
#
#   protoc                 Debian's protobuf-compiler (3.21.12 on bookworm)
#   protoc-gen-go          go install, into $(go env GOPATH)/bin
#   protoc-gen-connect-go  go install
#   buf                    go install (lint and breaking-change checks)
#
# Run by .ci/run; developers run it once, then `go generate ./proto` with
# $(go env GOPATH)/bin on PATH.
set -euo pipefail

PROTOC_VERSION=3.21.12
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_CONNECT_GO=connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
BUF=github.com/bufbuild/buf/cmd/buf@v1.75.0

gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"

sudo=
[ "$(id -u)" = 0 ] || sudo=sudo

if ! command -v protoc >/dev/null 2>&1; then
	echo "tools: installing protobuf-compiler"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq protobuf-compiler >/dev/null
fi
if ! protoc --version | grep -qF " $PROTOC_VERSION"; then
	# Another Debian release has another protoc; TestGeneratedCodeIsCurrent
	# says whether its output differs.
	echo "tools: warning: $(protoc --version), the committed code was generated with $PROTOC_VERSION" >&2
fi

# goinstall PKG@VERSION installs the command unless $gobin already has it
# built from that module version.
goinstall() {
	local pkg=${1%@*} want=${1#*@}
	local bin="$gobin/${pkg##*/}"
	local have
	have=$(go version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3; exit }') || true
	if [ "$have" = "$want" ]; then
		return
	fi
	echo "tools: installing $1${have:+ (had $have)}"
	CGO_ENABLED=0 go install "$1"
}

goinstall "$PROTOC_GEN_GO"
goinstall "$PROTOC_GEN_CONNECT_GO"
goinstall "$BUF"
