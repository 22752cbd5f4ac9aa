//go:build linux

package sysinit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// Seed is what FirstBoot read and applied.
type Seed struct {
	InstanceID string
	Hostname   string
	// CACerts are the PEM certificates the user-data asks to trust.
	CACerts []string
	// Files are the paths of write_files written (first boot of the
	// instance only).
	Files []string
	// Skipped names what the test OS does not do (users, runcmd, scripts).
	Skipped []string
}

type metaData struct {
	InstanceID    string `yaml:"instance-id"`
	LocalHostname string `yaml:"local-hostname"`
}

type cloudConfig struct {
	Hostname string `yaml:"hostname"`
	CACerts  *struct {
		Trusted []string `yaml:"trusted"`
	} `yaml:"ca_certs"`
	WriteFiles []struct {
		Path        string `yaml:"path"`
		Content     string `yaml:"content"`
		Permissions string `yaml:"permissions"`
	} `yaml:"write_files"`
	Users  []any `yaml:"users"`
	Runcmd []any `yaml:"runcmd"`
}

// FirstBoot applies the NoCloud seed under root (the installed system's
// file system) the way cloud-init does, for what the test OS needs: the
// host name (every boot), the CA certificates to trust (added to
// /etc/ssl/certs/ca-certificates.crt of the running system, every boot),
// and write_files (into root, once per instance ID). Users, runcmd and
// scripts are reported as skipped: the test OS has no logins and no
// shell. A real OS image runs cloud-init itself on the same seed.
func FirstBoot(root string, log *slog.Logger) (*Seed, error) {
	seed, files, err := readSeed(root)
	if err != nil {
		return nil, err
	}
	if seed.Hostname != "" {
		if err := unix.Sethostname([]byte(seed.Hostname)); err != nil {
			return nil, fmt.Errorf("first boot: host name: %w", err)
		}
	}
	if len(seed.CACerts) > 0 {
		if err := appendFile("/etc/ssl/certs/ca-certificates.crt", strings.Join(seed.CACerts, "\n")+"\n"); err != nil {
			return nil, fmt.Errorf("first boot: CA certificates: %w", err)
		}
	}
	if err := writeFiles(root, seed, files); err != nil {
		return nil, err
	}
	log.Info("first boot", "instance", seed.InstanceID, "hostname", seed.Hostname, "ca_certs", len(seed.CACerts),
		"files_written", len(seed.Files), "skipped", strings.Join(seed.Skipped, ", "))
	return seed, nil
}

// readSeed reads and parses the seed under root.
func readSeed(root string) (*Seed, []cloudFile, error) {
	seed := &Seed{}
	dir := filepath.Join(root, SeedDir)
	mb, err := os.ReadFile(filepath.Join(dir, "meta-data"))
	if err != nil {
		return nil, nil, fmt.Errorf("first boot: no seed from provisioning: %w", err)
	}
	var md metaData
	if err := yaml.Unmarshal(mb, &md); err != nil {
		return nil, nil, fmt.Errorf("first boot: meta-data: %w", err)
	}
	seed.InstanceID, seed.Hostname = md.InstanceID, md.LocalHostname
	ub, err := os.ReadFile(filepath.Join(dir, "user-data"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("first boot: %w", err)
	}
	parts, err := userDataParts(ub)
	if err != nil {
		return nil, nil, fmt.Errorf("first boot: user-data: %w", err)
	}
	var files []cloudFile
	for _, p := range parts {
		if !strings.HasPrefix(strings.TrimSpace(p.body), "#cloud-config") {
			seed.Skipped = append(seed.Skipped, "part "+p.name+" ("+p.kind+")")
			continue
		}
		var cc cloudConfig
		if err := yaml.Unmarshal([]byte(p.body), &cc); err != nil {
			return nil, nil, fmt.Errorf("first boot: user-data part %s: %w", p.name, err)
		}
		if cc.Hostname != "" { // user-data's hostname wins over meta-data's
			seed.Hostname = cc.Hostname
		}
		if cc.CACerts != nil {
			seed.CACerts = append(seed.CACerts, cc.CACerts.Trusted...)
		}
		for _, f := range cc.WriteFiles {
			files = append(files, cloudFile{path: f.Path, content: f.Content, perm: f.Permissions})
		}
		if len(cc.Users) > 0 {
			seed.Skipped = append(seed.Skipped, "users")
		}
		if len(cc.Runcmd) > 0 {
			seed.Skipped = append(seed.Skipped, "runcmd")
		}
	}
	return seed, files, nil
}

// writeFiles writes write_files into root once per instance, as
// cloud-init's per-instance modules do.
func writeFiles(root string, seed *Seed, files []cloudFile) error {
	marker := filepath.Join(root, "var/lib/cloud/eim-instance-id")
	if done, _ := os.ReadFile(marker); seed.InstanceID != "" && strings.TrimSpace(string(done)) == seed.InstanceID {
		return nil
	}
	for _, f := range files {
		if err := f.write(root); err != nil {
			return fmt.Errorf("first boot: write_files: %w", err)
		}
		seed.Files = append(seed.Files, f.path)
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return fmt.Errorf("first boot: %w", err)
	}
	if err := os.WriteFile(marker, []byte(seed.InstanceID+"\n"), 0o644); err != nil {
		return fmt.Errorf("first boot: %w", err)
	}
	return nil
}

type cloudFile struct{ path, content, perm string }

func (f cloudFile) write(root string) error {
	if !filepath.IsAbs(f.path) {
		return fmt.Errorf("%q is not an absolute path", f.path)
	}
	mode := os.FileMode(0o644)
	if f.perm != "" {
		v, err := strconv.ParseUint(f.perm, 8, 32)
		if err != nil {
			return fmt.Errorf("%s: permissions %q: %w", f.path, f.perm, err)
		}
		mode = os.FileMode(v) & 0o7777
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	rel := strings.TrimPrefix(filepath.Clean(f.path), "/")
	if err := r.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return err
	}
	if err := r.WriteFile(rel, []byte(f.content), mode); err != nil {
		return err
	}
	return r.Chmod(rel, mode)
}

func appendFile(path, s string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type part struct{ name, kind, body string }

// userDataParts splits user-data: one part, or a MIME multipart archive
// (what provisioning writes when an instance has custom configs).
func userDataParts(b []byte) ([]part, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if !bytes.HasPrefix(b, []byte("Content-Type:")) && !bytes.HasPrefix(b, []byte("MIME-Version:")) {
		return []part{{name: "user-data", kind: "text", body: string(b)}}, nil
	}
	msg, err := mail.ReadMessage(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return nil, fmt.Errorf("content type %q: want multipart", msg.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var parts []part
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, err
		}
		kind, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts = append(parts, part{name: p.FileName(), kind: kind, body: string(body)})
	}
}
