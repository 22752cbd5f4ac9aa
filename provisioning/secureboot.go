package provisioning

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/eimhq/eim/secureboot"
)

// signedCache remembers which artifact files were checked and found signed
// with the Secure Boot db key, by name, size and modification time, so a
// fleet booting at once does not hash a kernel per request. A file
// replaced (eim microos build writes atomically: a new inode, a new
// time) is checked again.
type signedCache struct {
	mu sync.Mutex
	ok map[string]fileStamp
}

type fileStamp struct {
	size int64
	mod  time.Time
	cert [32]byte
}

// maxEFI bounds what is read to be checked (a kernel is tens of MB).
const maxEFI = 256 << 20

// check returns nil when f is not an EFI executable (no "MZ" header: the
// initramfs, manifests, OS images) or is one signed with cert's key.
func (c *signedCache) check(f *os.File, fi fs.FileInfo, cert *x509.Certificate) error {
	var head [2]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || !bytes.Equal(head[:], []byte("MZ")) {
		return nil
	}
	if cert == nil {
		return errors.New("the server has no Secure Boot certificate")
	}
	stamp := fileStamp{size: fi.Size(), mod: fi.ModTime(), cert: sha256.Sum256(cert.Raw)}
	c.mu.Lock()
	hit := c.ok[fi.Name()] == stamp
	c.mu.Unlock()
	if hit {
		return nil
	}
	if fi.Size() > maxEFI {
		return errors.New("larger than an EFI executable may be here")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEFI))
	if err != nil {
		return err
	}
	if err := secureboot.Verify(data, cert); err != nil {
		return err
	}
	c.mu.Lock()
	c.ok[fi.Name()] = stamp
	c.mu.Unlock()
	return nil
}
