package tpmseal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-tpm/tpm2/transport"
)

// rwTransport sends TPM commands over a device or a stream: a character
// device (/dev/tpmrm0) answers a command in one read; a socket (swtpm) may
// split the answer, which is read until the length its header says.
type rwTransport struct{ rw io.ReadWriter }

func newTransport(rw io.ReadWriter) transport.TPM { return rwTransport{rw} }

const maxResponse = 64 << 10

func (t rwTransport) Send(cmd []byte) ([]byte, error) {
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
