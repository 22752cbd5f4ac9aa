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
