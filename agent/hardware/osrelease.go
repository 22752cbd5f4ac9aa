package hardware

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// osRelease reads PRETTY_NAME from /etc/os-release, or from
// /usr/lib/os-release, which os-release(5) names as its fallback.
func (c *collector) osRelease(h *hostv1.Hardware) error {
	b, err := os.ReadFile(c.path("/etc/os-release"))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = os.ReadFile(c.path("/usr/lib/os-release"))
	}
	if err != nil {
		return err
	}
	h.OsRelease = prettyName(b)
	return nil
}

// prettyName returns PRETTY_NAME of an os-release file: shell-style
// assignments whose values may be quoted and backslash-escaped. Without
// one, os-release(5) says the name is "Linux".
func prettyName(b []byte) string {
	name := "Linux"
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && k == "PRETTY_NAME" {
			name = unquote(v)
		}
	}
	return name
}

func unquote(v string) string {
	if len(v) < 2 || (v[0] != '"' && v[0] != '\'') || v[len(v)-1] != v[0] {
		return v
	}
	q, v := v[0], v[1:len(v)-1]
	if q == '\'' {
		return v // no escapes inside single quotes
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("\"\\$`", v[i+1]) >= 0 {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
