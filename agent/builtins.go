//go:build linux

package agent

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/eimhq/eim/agent/sysinit"
)

// builtins stand in for the external programs Machine runs when they are
// not installed (the micro-OS has none), with the arguments Machine passes.
var builtins = map[string]func(args []string) error{
	"mount": func(args []string) error {
		if len(args) != 2 {
			return badArgs("mount", args)
		}
		_, err := sysinit.Mount(args[0], args[1], 0)
		return err
	},
	"umount": func(args []string) error {
		if len(args) != 1 {
			return badArgs("umount", args)
		}
		return sysinit.Unmount(args[0])
	},
	"blockdev": func(args []string) error {
		if len(args) != 2 || args[0] != "--rereadpt" {
			return badArgs("blockdev", args)
		}
		return sysinit.RereadPartitions(args[1])
	},
	"reboot": func(args []string) error {
		return sysinit.Reboot(slog.New(slog.DiscardHandler))
	},
}

func badArgs(name string, args []string) error {
	return fmt.Errorf("built-in %s: unexpected arguments %q", name, strings.Join(args, " "))
}
