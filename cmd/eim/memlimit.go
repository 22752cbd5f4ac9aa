package main

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// A server in a container (or a systemd unit with MemoryMax) is killed
// when it passes its memory limit, and the Go runtime does not know that
// limit: it lets the heap grow to twice the live heap between collections
// (GOGC=100), which at 100,000 hosts is well over a gigabyte. So unless
// GOMEMLIMIT says otherwise, the server sets the runtime's soft limit to
// memLimitShare of the cgroup's limit: near the limit the collector runs
// more often instead of the kernel killing the process.

// memLimitShare is the share of the cgroup's limit given to the Go
// runtime; the rest is for what it does not count (thread stacks outside
// the heap, SQLite's page cache, the kernel's accounting of the binary).
const memLimitShare = 0.9

// noMemLimit is above any real limit: cgroup v1 writes "unlimited" as a
// number near 2^63.
const noMemLimit = 1 << 60

// setMemoryLimit applies memLimitShare of the cgroup's memory limit as the
// runtime's soft limit, unless GOMEMLIMIT is set (the runtime read it; "off"
// turns the limit off) or there is no limit. It says what it did.
func setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info("memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return
	}
	limit, where := cgroupMemoryLimit(self, "/sys/fs/cgroup")
	if limit <= 0 {
		return
	}
	soft := int64(float64(limit) * memLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info("memory limit: the Go runtime collects harder near the cgroup's limit (GOMEMLIMIT overrides)", "cgroup", where, "cgroupBytes", limit, "softBytes", soft)
}

// cgroupMemoryLimit returns the memory limit that applies to the process
// whose /proc/self/cgroup is self, with the cgroup file system at root:
// the smallest limit of its cgroup and its ancestors (cgroup v2
// memory.max; v1 memory.limit_in_bytes), and the file it came from; 0
// when there is none.
func cgroupMemoryLimit(self []byte, root string) (int64, string) {
	var best int64
	var where string
	consider := func(file string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= noMemLimit {
			return
		}
		if best == 0 || n < best {
			best, where = n, file
		}
	}
	walk := func(dir, cgPath, file string) {
		// In a container the cgroup namespace makes its own cgroup "/";
		// on a host the path names it below the root.
		for p := path.Clean("/" + cgPath); ; p = path.Dir(p) {
			consider(filepath.Join(dir, filepath.FromSlash(p), file))
			if p == "/" {
				return
			}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			walk(root, parts[2], "memory.max")
		case hasController(parts[1], "memory"): // v1
			walk(filepath.Join(root, "memory"), parts[2], "memory.limit_in_bytes")
		}
	}
	return best, where
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
