package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	root := t.TempDir()
	put := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// v2 on a host: the unit's limit, under a slice with a larger one.
	put("memory.max", "max\n")
	put("system.slice/memory.max", "8589934592\n")
	put("system.slice/eim.service/memory.max", "2147483648\n")
	// v2 in a container (cgroup namespace: its cgroup is "/").
	// v1: the memory controller's hierarchy, "unlimited" as a huge number.
	put("memory/memory.limit_in_bytes", "9223372036854771712\n")
	put("memory/kubepods/pod1/memory.limit_in_bytes", "1073741824\n")
	put("memory/kubepods/pod1/app/memory.limit_in_bytes", "9223372036854771712\n")
	cases := []struct {
		name, self string
		want       int64
		from       string
	}{
		{"v2 unit below slices", "0::/system.slice/eim.service\n", 2147483648, "system.slice/eim.service/memory.max"},
		{"v2 parent smaller", "0::/system.slice/other.service\n", 8589934592, "system.slice/memory.max"},
		{"v2 none", "0::/\n", 0, ""},
		{"v1 pod limit above the container's cgroup", "12:cpu,cpuacct:/kubepods/pod1/app\n7:memory:/kubepods/pod1/app\n", 1073741824, "memory/kubepods/pod1/memory.limit_in_bytes"},
		{"v1 unlimited", "7:memory:/\n", 0, ""},
		{"no memory controller", "12:cpu:/x\n", 0, ""},
		{"garbage", "not a cgroup file", 0, ""},
	}
	for _, c := range cases {
		got, from := cgroupMemoryLimit([]byte(c.self), root)
		wantFrom := ""
		if c.from != "" {
			wantFrom = filepath.Join(root, filepath.FromSlash(c.from))
		}
		if got != c.want || from != wantFrom {
			t.Errorf("%s: got %d from %q, want %d from %q", c.name, got, from, c.want, wantFrom)
		}
	}
}
