// Command image builds the eim container image without a container daemon:
// an OCI image layout (a directory, as `crane push` or `skopeo copy oci:DIR`
// take it) of one image on no base (scratch) holding the static eim binary as
// /eim, the CA certificates for outbound HTTPS, a non-root user and /tmp.
//
//	go run . -binary /tmp/eim -out /tmp/eim-image -version v0.1.0 -revision $(git rev-parse HEAD)
//	go run . -check /tmp/eim-image
//
// The image is reproducible: every file and the config carry the time given
// by -created (default: SOURCE_DATE_EPOCH, else the Unix epoch), so the same
// binary gives the same digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o Options
	var check, created string
	fs.StringVar(&o.Binary, "binary", "", "the static eim binary (CGO_ENABLED=0 go build ./cmd/eim)")
	fs.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates put in the image")
	fs.StringVar(&o.Out, "out", "", "directory to write the OCI image layout to (replaced)")
	fs.StringVar(&o.Version, "version", "dev", "org.opencontainers.image.version, and the reference name in the layout")
	fs.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision (the commit)")
	fs.StringVar(&o.Source, "source", "https://github.com/eimhq/eim", "org.opencontainers.image.source")
	fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "architecture of the binary (GOARCH)")
	fs.StringVar(&created, "created", "", "creation time, RFC 3339 or Unix seconds (default: SOURCE_DATE_EPOCH, else 1970-01-01)")
	fs.StringVar(&check, "check", "", "check the image layout in this directory instead of building one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if check != "" {
		r, err := Check(check)
		if err != nil {
			return err
		}
		fmt.Printf("image %s ok: %s, entrypoint %v, user %s, %d files, %d bytes compressed\n", check, r.Digest, r.Entrypoint, r.User, r.Files, r.Size)
		return nil
	}
	if o.Binary == "" || o.Out == "" {
		return fmt.Errorf("-binary and -out are required (or -check DIR)")
	}
	if created == "" {
		created = os.Getenv("SOURCE_DATE_EPOCH")
	}
	t, err := parseTime(created)
	if err != nil {
		return err
	}
	o.Created = t
	d, err := Build(o)
	if err != nil {
		return err
	}
	fmt.Printf("image %s: %s\n", o.Out, d)
	return nil
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-created %q: want RFC 3339 or Unix seconds", s)
	}
	return t.UTC(), nil
}
