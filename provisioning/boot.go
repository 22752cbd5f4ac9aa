package provisioning

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/eimhq/eim/bootartifact"
)

// The micro-OS artifacts the boot script loads.
const (
	KernelName = bootartifact.KernelFile
	InitrdName = bootartifact.InitrdFile
)

// enrollRe is what an enrollment token may contain: it goes on the kernel
// command line, so nothing that could end the line or split an argument.
var enrollRe = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)

// BootHandler serves the network boot under /boot/ (plain HTTP is fine: the
// script and the micro-OS carry only the CA fingerprint; everything after
// is HTTPS pinned to it):
//
//	GET /boot/boot.ipxe[?enroll=TOKEN]  the iPXE script
//	GET /boot/artifacts/NAME            a file of opts.ArtifactsDir (Range supported)
//	GET /boot/artifacts/eim-microos.iso[?enroll=TOKEN]  the micro-OS as a CD (bootcd.go)
func BootHandler(opts Options) http.Handler {
	b := &boot{opts: opts}
	b.signed.ok = map[string]fileStamp{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boot/boot.ipxe", b.script)
	mux.HandleFunc("GET /boot/artifacts/{name}", b.artifact)
	mux.HandleFunc("/boot/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such boot resource: "+r.URL.Path+" (try /boot/boot.ipxe)", http.StatusNotFound)
	})
	return mux
}

type boot struct {
	opts   Options
	signed signedCache
	uki    ukiCmdline
}

// script renders the iPXE script. Artifact paths are relative, so iPXE
// fetches them from wherever it fetched the script (no Host header trust).
// A deployment that requires Secure Boot gets the unified kernel image's
// script (ukiScript); the others the kernel and initramfs, the per-boot
// arguments on the kernel's command line.
func (b *boot) script(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("enroll")
	if token != "" && !enrollRe.MatchString(token) {
		http.Error(w, "enroll: not a valid enrollment token", http.StatusBadRequest)
		return
	}
	if b.opts.RequireSecureBoot {
		b.ukiScript(w, token)
		return
	}
	args := []string{"initrd=" + InitrdName, "eim.url=" + b.opts.AgentURL, "eim.ca=sha256:" + b.opts.CAFingerprint}
	if token != "" {
		args = append(args, "eim.enroll="+token)
	}
	args = append(args, "console=ttyS0", "console=tty0")
	var sb strings.Builder
	sb.WriteString("#!ipxe\n")
	sb.WriteString("# EIM network boot: load the micro-OS, whose agent calls home.\n")
	sb.WriteString("echo EIM: booting the micro-OS (server " + b.opts.AgentURL + ")\n")
	fmt.Fprintf(&sb, "kernel artifacts/%s %s || goto failed\n", KernelName, strings.Join(args, " "))
	fmt.Fprintf(&sb, "initrd artifacts/%s || goto failed\n", InitrdName)
	sb.WriteString("boot || goto failed\n")
	sb.WriteString(":failed\necho EIM: boot failed; retrying in 30 seconds\nsleep 30\nchain boot.ipxe" + querySuffix(token) + "\n")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(sb.String()))
}

func querySuffix(token string) string {
	if token == "" {
		return ""
	}
	return "?enroll=" + token
}

// artifact serves one file of the artifacts directory. os.Root refuses any
// name that would leave the directory, symbolic links included.
func (b *boot) artifact(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		http.Error(w, "invalid artifact name", http.StatusBadRequest)
		return
	}
	notFound := func() {
		http.Error(w, fmt.Sprintf("boot artifact %q not found: put the micro-OS kernel (%s) and initramfs (%s) in the server's boot artifacts directory (--boot-artifacts)", name, KernelName, InitrdName), http.StatusNotFound)
	}
	if b.opts.ArtifactsDir == "" {
		notFound()
		return
	}
	root, err := os.OpenRoot(b.opts.ArtifactsDir)
	if err != nil {
		notFound()
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if name == CDName && errors.Is(err, fs.ErrNotExist) {
		b.cd(w, r, root)
		return
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.logger().Warn("boot: open artifact", "name", name, "err", err)
		}
		notFound()
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		notFound()
		return
	}
	if b.opts.RequireSecureBoot {
		if err := b.signed.check(f, fi, b.opts.SecureBootCert); err != nil {
			b.logger().Warn("boot: refused an EFI executable not signed for Secure Boot", "name", name, "err", err)
			http.Error(w, fmt.Sprintf("boot artifact %q: this deployment requires Secure Boot and the file is not signed with its db key (%v): build the boot artifacts with eim microos build, which signs them", name, err), http.StatusForbidden)
			return
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			notFound()
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	// An OS image takes longer than the listener's write timeout on most
	// links: each write gets its own deadline instead, so a reader that
	// keeps reading gets the whole file and one that stalls is dropped.
	http.ServeContent(&progressDeadline{ResponseWriter: w, rc: http.NewResponseController(w)}, r, name, fi.ModTime(), f)
}

// artifactStall is how long an artifact download may make no progress.
const artifactStall = time.Minute

// progressDeadline moves the connection's write deadline forward by
// artifactStall at every write.
type progressDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (p *progressDeadline) Write(b []byte) (int, error) {
	_ = p.rc.SetWriteDeadline(time.Now().Add(artifactStall))
	return p.ResponseWriter.Write(b)
}

func (b *boot) logger() *slog.Logger {
	if b.opts.Logger != nil {
		return b.opts.Logger
	}
	return slog.New(slog.DiscardHandler)
}
