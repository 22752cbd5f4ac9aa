package agent

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Host is the node's own System: programs run for real, /proc tells the
// processes and mounts.
type Host struct{}

// Run implements System.
func (Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return Exec(ctx, name, args...)
}

// under tells whether p lies under one of dirs (see System.Release).
func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") || (strings.HasSuffix(d, "-") && strings.HasPrefix(p, d)) {
			return true
		}
	}
	return false
}

// Release implements System.
func (Host) Release(ctx context.Context, dirs []string) error {
	var errs []error
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !under(strings.TrimSuffix(exe, " (deleted)"), dirs) {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil {
			if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, err)
			}
		}
	}
	mounts, err := mountsUnder("/proc/self/mountinfo", dirs)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if out, err := Exec(ctx, "umount", "-l", m); err != nil {
			errs = append(errs, cmdError("umount "+m, out, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points of a mountinfo file that lie under
// dirs, deepest first.
func mountsUnder(mountinfo string, dirs []string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		// Octal escapes: a space is \040.
		mp := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(fields[4])
		if under(mp, dirs) && !slices.Contains(out, mp) {
			out = append(out, mp)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out, s.Err()
}
