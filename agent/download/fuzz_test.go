package download_test

import (
	"path"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent/download"
)

// FuzzCheckPath: a path the server lists that CheckPath accepts is a
// clean relative path with no ".." segment, so the file stays below the
// data path's directory.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a.txt", "dir/b.bin", "../x", "a/../../b", "/etc/passwd", "a//b", "./a", "a\\..\\b", ".eim-download-1", "a\x00b", "..", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if download.CheckPath(p) != "" {
			return
		}
		if strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." {
			t.Fatalf("accepted %q, not a clean relative path", p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." || seg == "" || seg == "." {
				t.Fatalf("accepted %q, with a %q segment", p, seg)
			}
		}
	})
}
