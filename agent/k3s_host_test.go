package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The mounts a removal releases: those under k3s's directories and the
// pods' network namespaces, deepest first, nothing else.
func TestMountsUnder(t *testing.T) {
	info := `22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 22 0:25 / /run rw - tmpfs tmpfs rw
41 22 0:40 / /var/lib/kubelet/pods/abc/volumes/kubernetes.io~projected/kube-api-access rw - tmpfs tmpfs rw
42 22 0:41 / /var/lib/rancher/k3s/agent/containerd/io.containerd.runtime.v2.task/k8s.io/123/rootfs rw - overlay overlay rw
43 30 0:4 net:[4026532] /run/netns/cni-1234 rw - nsfs nsfs rw
44 22 0:42 / /var/lib/kubelet2 rw - tmpfs tmpfs rw
45 22 0:43 / /var/lib/rancher/k3s/with\040space rw - tmpfs tmpfs rw
`
	p := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(p, []byte(info), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := mountsUnder(p, []string{"/run/netns/cni-", "/var/lib/rancher/k3s", "/var/lib/kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/var/lib/rancher/k3s/agent/containerd/io.containerd.runtime.v2.task/k8s.io/123/rootfs",
		"/var/lib/kubelet/pods/abc/volumes/kubernetes.io~projected/kube-api-access",
		"/var/lib/rancher/k3s/with space",
		"/run/netns/cni-1234",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
