package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The image's user: "nonroot" as distroless names it, never 0.
const (
	uid      = 65532
	userName = "nonroot"
)

// Options say what goes into the image.
type Options struct {
	Binary, CACerts, Out      string
	Version, Revision, Source string
	Arch                      string
	Created                   time.Time
}

// Build writes the image layout to o.Out and returns the image's digest.
func Build(o Options) (v1.Hash, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return v1.Hash{}, fmt.Errorf("binary %s: not an ELF executable", o.Binary)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("CA certificates (install Debian's ca-certificates, or pass -ca-certs): %w", err)
	}
	if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		return v1.Hash{}, fmt.Errorf("CA certificates %s: no PEM certificate", o.CACerts)
	}
	fsTar, err := rootFS(bin, certs, o.Created)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(fsTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "eim deploy/image: /eim, CA certificates, user nonroot, /tmp", Comment: "no base image"},
	})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: o.Created}
	labels := map[string]string{
		"org.opencontainers.image.title":       "eim",
		"org.opencontainers.image.description": "EIM, the edge infrastructure manager: server and CLI",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	cf.Config = v1.Config{
		Entrypoint:   []string{"/eim"},
		Cmd:          []string{"server", "--http-addr=:8080", "--agent-addr=:8443", "--data-dir=/tmp/eim-data"},
		User:         strconv.Itoa(uid) + ":" + strconv.Itoa(uid),
		WorkingDir:   "/tmp",
		Env:          []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "8443/tcp": {}},
		Labels:       labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("config: %w", err)
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(o.Out, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("layout: %w", err)
	}
	err = p.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: o.Arch}),
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.Version}))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("layout: %w", err)
	}
	return img.Digest()
}

// rootFS is the image's one layer: the binary, the CA bundle, the user
// database naming the non-root user, and a world-writable sticky /tmp.
func rootFS(bin, certs []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/tmp:/sbin/nologin\n", userName, uid, uid, userName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)
	steps := []error{
		dir("etc", 0o755),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		dir("etc/ssl", 0o755),
		dir("etc/ssl/certs", 0o755),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, certs),
		file("eim", 0o755, bin),
		dir("tmp", 0o1777),
	}
	if err := errors.Join(steps...); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Report is what Check found.
type Report struct {
	Digest     v1.Hash
	Entrypoint []string
	User       string
	Files      int
	Size       int64
}

// Check reads an image layout and checks it is what Build makes: one
// manifest, digests that match the blobs, /eim as the entrypoint (an
// executable in the layer), a non-root numeric user, the CA bundle, /tmp
// and the OCI labels.
func Check(dir string) (Report, error) {
	var r Report
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return r, fmt.Errorf("%s: not an OCI image layout: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return r, err
	}
	if len(im.Manifests) != 1 {
		return r, fmt.Errorf("%s: %d manifests, want 1", dir, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return r, err
	}
	if err := validate.Image(img); err != nil {
		return r, fmt.Errorf("blobs do not match their digests: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return r, err
	}
	var problems []string
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/eim" {
		problems = append(problems, fmt.Sprintf("entrypoint %q, want [/eim]", got))
	}
	user, _, _ := strings.Cut(cf.Config.User, ":")
	if n, err := strconv.Atoi(user); err != nil || n == 0 {
		problems = append(problems, fmt.Sprintf("user %q, want a numeric non-root user (runAsNonRoot needs a number)", cf.Config.User))
	}
	for _, l := range []string{"title", "source", "version", "created"} {
		if cf.Config.Labels["org.opencontainers.image."+l] == "" {
			problems = append(problems, "no label org.opencontainers.image."+l)
		}
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		problems = append(problems, fmt.Sprintf("platform %s/%s, want linux/ARCH", cf.OS, cf.Architecture))
	}
	layers, err := img.Layers()
	if err != nil {
		return r, err
	}
	if len(layers) != 1 {
		problems = append(problems, fmt.Sprintf("%d layers, want 1 (no base image)", len(layers)))
	}
	seen := map[string]*tar.Header{}
	for _, l := range layers {
		sz, err := l.Size()
		if err != nil {
			return r, err
		}
		r.Size += sz
		rc, err := l.Uncompressed()
		if err != nil {
			return r, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return r, fmt.Errorf("layer: %w", err)
			}
			seen[filepath.Clean("/"+h.Name)] = h
			if h.Name == "eim" {
				head := make([]byte, 4)
				if _, err := io.ReadFull(tr, head); err != nil || string(head) != "\x7fELF" {
					problems = append(problems, "/eim is not an ELF executable")
				}
			}
		}
		rc.Close()
	}
	r.Files = len(seen)
	if h := seen["/eim"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
		problems = append(problems, "no executable /eim")
	}
	if h := seen["/etc/ssl/certs/ca-certificates.crt"]; h == nil || h.Size == 0 {
		problems = append(problems, "no CA certificates at /etc/ssl/certs/ca-certificates.crt")
	}
	if h := seen["/tmp"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode&0o1777 != 0o1777 {
		problems = append(problems, "no world-writable sticky /tmp")
	}
	if h := seen["/etc/passwd"]; h == nil {
		problems = append(problems, "no /etc/passwd naming the user")
	}
	if len(problems) > 0 {
		return r, fmt.Errorf("%s: %s", dir, strings.Join(problems, "; "))
	}
	r.Digest = im.Manifests[0].Digest
	r.Entrypoint = cf.Config.Entrypoint
	r.User = cf.Config.User
	return r, nil
}
