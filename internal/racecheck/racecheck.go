// Package racecheck carries the race detector over to the processes that
// tests start. A test binary built with -race (the race step of .ci/run)
// builds the module's commands it runs as children with -race as well, so
// that the server, agent and tools those tests drive are checked too, and
// a test fails when a child's output holds a race report. Without -race
// the children are built as released: static, without cgo.
package racecheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Warning starts every report of the race detector.
const Warning = "WARNING: DATA RACE"

// Build builds the module's command pkg (an import path) into dir/name with
// the go command at goTool and returns the binary's path.
func Build(goTool, pkg, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	cgo := "CGO_ENABLED=0"
	if Enabled {
		args = append(args, "-race")
		cgo = "CGO_ENABLED=1" // the race detector's runtime is C
	}
	cmd := exec.Command(goTool, append(args, pkg)...)
	cmd.Env = append(os.Environ(), cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", cmd.Args[1:], err, out)
	}
	return bin, nil
}

// Reported says whether a child's output holds a report of the race
// detector.
func Reported(output []byte) bool {
	return bytes.Contains(output, []byte(Warning))
}
