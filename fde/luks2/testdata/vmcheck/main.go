// Command vmcheck is the /init of the initramfs TestVMActivateAndSeal boots: it
// formats /dev/vda with luks2.Format (as the installer does), maps it with
// luks2.Activate through the kernel's dm-crypt and writes a pattern through
// the mapping; it opens /dev/vdb (which cryptsetup formatted and the test
// filled through Go's cipher) with luks2.Unlock and Activate and reports a
// digest of what the kernel decrypts. With a TPM (/tpm in the initramfs
// says the test attached one), it seals a secret with tpmseal through the
// kernel's /dev/tpmrm0 and unseals it; without, it checks that
// tpmseal.Open says ErrNoTPM. Then it powers the VM off. Its lines of
// result start with "VMCHECK ".
package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eimhq/eim/agent/sysinit"
	"github.com/eimhq/eim/fde/luks2"
	"github.com/eimhq/eim/fde/tpmseal"
	"golang.org/x/sys/unix"
)

func main() {
	err := run()
	if err != nil {
		fmt.Printf("VMCHECK FAIL %v\n", err)
	} else {
		fmt.Println("VMCHECK DONE")
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func run() error {
	if err := sysinit.MountKernelFS(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	rel := sysinit.KernelRelease()
	list, err := os.ReadFile("/modules.txt")
	if err != nil {
		return err
	}
	sysinit.LoadModules(filepath.Join("/lib/modules", rel), strings.Fields(string(list)), log)
	for _, d := range []string{"/dev/vda", "/dev/vdb"} {
		if err := waitFor(d); err != nil {
			return err
		}
	}
	key, err := os.ReadFile("/key")
	if err != nil {
		return err
	}
	pattern, err := os.ReadFile("/pattern")
	if err != nil {
		return err
	}

	// vda: format, map, write, unmap.
	f, err := os.OpenFile("/dev/vda", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	size, _ := f.Seek(0, io.SeekEnd)
	vk, err := luks2.NewVolumeKey()
	if err != nil {
		return err
	}
	if _, err := luks2.Format(f, size, key, luks2.Options{VolumeKey: vk, Label: "vmcheck"}); err != nil {
		return fmt.Errorf("format: %w", err)
	}
	f.Close()
	dev, err := luks2.Activate("vmcheck-a", "/dev/vda", vk)
	if err != nil {
		return err
	}
	if err := writeSync(dev, pattern); err != nil {
		return err
	}
	got, err := readN(dev, len(pattern))
	if err != nil {
		return err
	}
	fmt.Printf("VMCHECK vda-readback %x\n", sha256.Sum256(got))
	if err := luks2.Deactivate("vmcheck-a"); err != nil {
		return err
	}
	if _, err := os.Stat(dev); !os.IsNotExist(err) {
		return fmt.Errorf("%s still there after Deactivate", dev)
	}

	// vdb: cryptsetup's volume, read through the kernel.
	f, err = os.Open("/dev/vdb")
	if err != nil {
		return err
	}
	vk, err = luks2.Unlock(f, key)
	f.Close()
	if err != nil {
		return fmt.Errorf("unlock vdb: %w", err)
	}
	dev, err = luks2.Activate("vmcheck-b", "/dev/vdb", vk)
	if err != nil {
		return err
	}
	got, err = readN(dev, len(pattern))
	if err != nil {
		return err
	}
	fmt.Printf("VMCHECK vdb %x\n", sha256.Sum256(got))
	if _, err := luks2.Activate("vmcheck-b", "/dev/vdb", vk); err == nil {
		return fmt.Errorf("a second mapping of the same name was accepted")
	} else {
		fmt.Printf("VMCHECK duplicate-name %v\n", err)
	}
	if err := luks2.Deactivate("vmcheck-b"); err != nil {
		return err
	}
	return checkTPM()
}

func checkTPM() error {
	_, err := os.Stat("/tpm")
	wantTPM := err == nil
	rw, err := tpmseal.Open()
	if !wantTPM {
		if !errors.Is(err, tpmseal.ErrNoTPM) {
			return fmt.Errorf("tpmseal.Open without a TPM: got %v, want ErrNoTPM", err)
		}
		fmt.Println("VMCHECK tpm absent:", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer rw.Close()
	secret := []byte("the disk's key, sealed to PCR 7")
	sealed, err := tpmseal.Seal(rw, secret, nil)
	if err != nil {
		return err
	}
	got, err := tpmseal.Unseal(rw, sealed)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, secret) {
		return fmt.Errorf("unsealed %q, want %q", got, secret)
	}
	// The same through a file Go opened non-blocking (its poller's way):
	// the transport waits for the answer.
	f, err := os.OpenFile("/dev/tpmrm0", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if got, err = tpmseal.Unseal(f, sealed); err != nil || !bytes.Equal(got, secret) {
		return fmt.Errorf("unseal through os.OpenFile: got %q, %v", got, err)
	}
	fmt.Println("VMCHECK tpm sealed and unsealed")
	return nil
}

func waitFor(p string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeSync(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}

func readN(p string, n int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}
