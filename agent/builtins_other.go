//go:build !linux

package agent

// builtins: elsewhere than on Linux, Machine runs the real programs only.
var builtins = map[string]func(args []string) error{}
