package tpmseal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-tpm/tpm2/transport"
	"golang.org/x/sys/unix"
)

// rwTransport sends TPM commands over a device or a stream: a character
// device (/dev/tpmrm0) answers a command in one read; a socket (swtpm) may
// split the answer, which is read until the length its header says.
type rwTransport struct{ rw io.ReadWriter }

func newTransport(rw io.ReadWriter) transport.TPM { return rwTransport{rw} }

const maxResponse = 64 << 10

// Response codes that ask for the same command again: TPM_RC_RETRY (e.g.
// the first command on an object without noDA after a disorderly
// shutdown, while the TPM writes its dictionary-attack state), TPM_RC_YIELDED,
// TPM_RC_TESTING. The TPM ran nothing, so the same bytes (sessions and all)
// go again, as tpm2-tss's ESAPI does.
const (
	rcRetry   = 0x922
	rcYielded = 0x908
	rcTesting = 0x90a
)

func (t rwTransport) Send(cmd []byte) ([]byte, error) {
	for try := 0; ; try++ {
		rsp, err := t.send(cmd)
		if err != nil || len(rsp) < 10 || try == 20 {
			return rsp, err
		}
		switch binary.BigEndian.Uint32(rsp[6:10]) {
		case rcRetry, rcYielded, rcTesting:
			time.Sleep(time.Duration(try+1) * 10 * time.Millisecond)
			continue
		}
		return rsp, nil
	}
}

func (t rwTransport) send(cmd []byte) ([]byte, error) {
	if _, err := t.rw.Write(cmd); err != nil {
		return nil, fmt.Errorf("tpmseal: send to the TPM: %w", err)
	}
	buf := make([]byte, 4096)
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		m, err := t.rw.Read(buf[n:])
		if m == 0 && errors.Is(err, io.EOF) {
			// A TPM device opened non-blocking has no answer yet: wait
			// for it.
			if f, ok := t.rw.(*os.File); ok {
				if werr := waitReadable(f); werr != nil {
					return nil, fmt.Errorf("tpmseal: wait for the TPM's answer: %w", werr)
				}
				continue
			}
		}
		n += m
		if n >= 10 {
			size := int(binary.BigEndian.Uint32(buf[2:6]))
			if size < 10 || size > maxResponse {
				return nil, fmt.Errorf("tpmseal: the TPM answered with a length of %d", size)
			}
			if n >= size {
				return buf[:size], nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("tpmseal: read the TPM's answer: %w", err)
		}
	}
}

// answerTimeout bounds the wait for a TPM's answer (key generation on a
// slow TPM takes seconds).
const answerTimeout = 2 * time.Minute

// waitReadable waits until the TPM device f has an answer to read.
func waitReadable(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = sc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, int(answerTimeout/time.Millisecond))
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil:
				perr = err
			case n == 0:
				perr = fmt.Errorf("no answer in %v", answerTimeout)
			}
			return
		}
	})
	if err != nil {
		return err
	}
	return perr
}

// Transport is the go-tpm transport over rw (the file Open returns, or a
// swtpm socket) that tpmseal itself uses: it reads an answer whole, and
// waits for it on a TPM device opened non-blocking. Other packages that
// talk to the same TPM (attest/tpmquote) use it too.
func Transport(rw io.ReadWriter) transport.TPM { return newTransport(rw) }
