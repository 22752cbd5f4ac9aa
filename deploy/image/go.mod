// Module image builds the eim container image as an OCI image layout (a
// directory), without a container daemon. Kept out of the product's go.mod:
// the server does not link go-containerregistry.
module github.com/eimhq/eim/deploy/image

go 1.26.8

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
