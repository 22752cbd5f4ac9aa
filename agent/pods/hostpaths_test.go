package pods_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent/pods"
)

func TestHostPaths(t *testing.T) {
	got, err := pods.HostPaths([]byte(`apiVersion: v1
kind: Pod
spec:
  volumes:
  - name: a
    hostPath: {path: /var/lib/eim-workloads/cam/export}
  - name: b
    hostPath: {path: /data/in, type: Directory}
  - name: c
    hostPath: {path: /data/new, type: DirectoryOrCreate}
  - name: sock
    hostPath: {path: /run/x.sock, type: Socket}
  - name: tmp
    emptyDir: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/var/lib/eim-workloads/cam/export", "/data/in", "/data/new"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	_, err = pods.HostPaths([]byte("spec:\n  volumes:\n  - name: rel\n    hostPath: {path: data}\n"))
	if err == nil || !strings.Contains(err.Error(), "volume rel") {
		t.Errorf("relative hostPath: got %v, want an error naming volume rel", err)
	}
}

// FuzzHostPaths: pod YAML comes from the server; whatever it is, HostPaths
// neither panics nor returns a relative path.
func FuzzHostPaths(f *testing.F) {
	f.Add([]byte("spec:\n  volumes:\n  - name: a\n    hostPath: {path: /x}\n"))
	f.Add([]byte("spec:\n  volumes:\n  - name: a\n    hostPath: {path: x, type: Directory}\n"))
	f.Add([]byte("spec: [1, 2]\n"))
	f.Add([]byte("{{{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dirs, err := pods.HostPaths(b)
		if err != nil {
			return
		}
		for _, d := range dirs {
			if !strings.HasPrefix(d, "/") {
				t.Fatalf("HostPaths(%q) returned a relative path %q", b, d)
			}
		}
	})
}
