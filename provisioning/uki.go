package provisioning

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/eimhq/eim/bootartifact"
	"github.com/eimhq/eim/secureboot"
)

// UKIName is the micro-OS as one signed unified kernel image: what the
// boot script loads when the deployment requires Secure Boot.
const UKIName = bootartifact.UKIFile

// ukiCmdline reads the fixed command line of the artifacts directory's
// unified kernel image (its .cmdline section), remembered by size and
// modification time, and checks that it is this server's: the image calls
// home to the agent URL and pins the CA its command line names, and a
// node booted from an image built for another server would only fail
// later, with less to say why.
type ukiCmdline struct {
	mu    sync.Mutex
	stamp fileStamp
	line  string
	err   error // what was wrong with the file of stamp (a fleet asking again does not read it again)
}

// get returns the UKI's command line, or an error naming what is wrong
// with it for this server.
func (u *ukiCmdline) get(opts Options) (string, error) {
	if opts.ArtifactsDir == "" {
		return "", errors.New("the server has no boot artifacts directory")
	}
	root, err := os.OpenRoot(opts.ArtifactsDir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := root.Open(UKIName)
	if err != nil {
		return "", fmt.Errorf("no %s in the boot artifacts (%w): build it with eim microos build --agent-url %s", UKIName, err, opts.AgentURL)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	stamp := fileStamp{size: fi.Size(), mod: fi.ModTime()}
	u.mu.Lock()
	if u.stamp == stamp && (u.line != "" || u.err != nil) {
		defer u.mu.Unlock()
		return u.line, u.err
	}
	u.mu.Unlock()
	if fi.Size() > maxEFI {
		return "", fmt.Errorf("%s is larger than an EFI executable may be here", UKIName)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEFI))
	if err != nil {
		return "", err // a read error is not the file's: not remembered
	}
	line, err := ukiCmdlineOf(b, opts)
	u.mu.Lock()
	u.stamp, u.line, u.err = stamp, line, err
	u.mu.Unlock()
	return line, err
}

// ukiCmdlineOf is the checked .cmdline section of the UKI b.
func ukiCmdlineOf(b []byte, opts Options) (string, error) {
	im, err := secureboot.Parse(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", UKIName, err)
	}
	sec, ok := im.Section(".cmdline")
	if !ok {
		return "", fmt.Errorf("%s has no .cmdline section: not a unified kernel image eim microos build made", UKIName)
	}
	line := strings.TrimRight(string(sec), "\x00 \n")
	if err := checkUKICmdline(line, opts.AgentURL, opts.CAFingerprint); err != nil {
		return "", fmt.Errorf("%s: %w", UKIName, err)
	}
	return line, nil
}

// checkUKICmdline: the signed command line names this server's agent URL
// and CA, and nothing that could split iPXE's line.
func checkUKICmdline(line, agentURL, caFingerprint string) error {
	if strings.ContainsAny(line, "\n\r\t$&|;") {
		return errors.New("its command line has characters a boot script cannot carry")
	}
	var url, ca string
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "eim.url":
			url = strings.TrimSuffix(v, "/")
		case "eim.ca":
			ca = strings.TrimPrefix(v, "sha256:")
		}
	}
	if want := strings.TrimSuffix(agentURL, "/"); url != want {
		return fmt.Errorf("it was built for the agent URL %q and this server's is %q: rebuild it with eim microos build --agent-url %s", url, want, want)
	}
	if ca != caFingerprint {
		return fmt.Errorf("it was built for the CA sha256:%s and this server's is sha256:%s: rebuild it with eim microos build on this server's data directory", ca, caFingerprint)
	}
	return nil
}

// ukiScript is the boot script of a deployment that requires Secure
// Boot: one signed image, no separate initramfs. iPXE's own arguments are
// the image's command line again: systemd-stub ignores them when the
// firmware enforces Secure Boot (the signed .cmdline counts) and uses
// them instead of it when not (a machine in setup mode, which provisioning
// then refuses for an instance that asks for Secure Boot), so both boot
// the same micro-OS.
func (b *boot) ukiScript(w http.ResponseWriter, token string) {
	if token != "" {
		http.Error(w, "enroll: this deployment requires Secure Boot, and its micro-OS's command line is signed inside its unified kernel image: a per-boot enrollment token cannot be passed on it; register the host (its UUID or serial number) before it boots", http.StatusBadRequest)
		return
	}
	line, err := b.uki.get(b.opts)
	if err != nil {
		b.logger().Warn("boot: no boot script: the unified kernel image cannot be served", "err", err)
		http.Error(w, "boot script: this deployment requires Secure Boot and boots the micro-OS as a signed unified kernel image: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	var sb strings.Builder
	sb.WriteString("#!ipxe\n")
	sb.WriteString("# EIM network boot with Secure Boot: the micro-OS as one signed unified kernel image\n")
	sb.WriteString("# (kernel, initramfs and command line inside), whose agent calls home.\n")
	sb.WriteString("echo EIM: booting the micro-OS, a signed unified kernel image (server " + b.opts.AgentURL + ")\n")
	fmt.Fprintf(&sb, "kernel artifacts/%s %s || goto failed\n", UKIName, line)
	sb.WriteString("boot || goto failed\n")
	sb.WriteString(":failed\necho EIM: boot failed; retrying in 30 seconds\nsleep 30\nchain boot.ipxe\n")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(sb.String()))
}
