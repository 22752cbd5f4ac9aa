package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/eimhq/eim/bootartifact"
)

// CheckBoot checks that the micro-OS this machine runs is the one the
// server built and signed. It fetches the manifest of the boot artifacts
// and its signature from the server (baseURL/boot/artifacts/, over the
// client's pinned TLS), verifies the signature with pub (the server's
// artifact-signing key, carried in the initramfs), and compares with the
// manifest the running kernel's release and every file the kernel
// unpacked from the initramfs into sysRoot (the agent itself, its
// configuration, the CA, the key, the modules). The kernel image and the
// initramfs image are gone from memory once they run (Debian's 6.1 kernel
// does not expose a retained initrd): their contents are what can be
// checked.
func CheckBoot(ctx context.Context, client *http.Client, baseURL string, pub ed25519.PublicKey, sysRoot, kernelRelease string) (*bootartifact.Manifest, error) {
	base := strings.TrimSuffix(baseURL, "/") + "/boot/artifacts/"
	body, err := fetch(ctx, client, base+bootartifact.FileName)
	if err != nil {
		return nil, err
	}
	sig, err := fetch(ctx, client, base+bootartifact.SignatureName)
	if err != nil {
		return nil, err
	}
	m, err := bootartifact.Verify(pub, body, sig)
	if err != nil {
		return nil, err
	}
	if m.KernelRelease != "" && m.KernelRelease != kernelRelease {
		return nil, fmt.Errorf("running kernel %s, the signed manifest is of kernel %s", kernelRelease, m.KernelRelease)
	}
	if len(m.InitrdFiles) == 0 {
		return nil, errors.New("the signed manifest lists no initramfs files to check")
	}
	root, err := os.OpenRoot(sysRoot)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, f := range m.InitrdFiles {
		if err := checkFile(root, f); err != nil {
			return nil, fmt.Errorf("this micro-OS is not the one the server signed: %w", err)
		}
	}
	return m, nil
}

func checkFile(root *os.Root, f bootartifact.File) error {
	r, err := root.Open(f.Name)
	if err != nil {
		return err
	}
	defer r.Close()
	return f.Check(r)
}

func fetch(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	return b, nil
}
