package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// systemActions carries out host actions on the installed OS: through
// systemd when it runs (a clean stop of every service), else with the
// reboot(2) system call after a sync.
type systemActions struct{}

func (systemActions) Reboot(ctx context.Context) error {
	return power(ctx, "reboot", syscall.LINUX_REBOOT_CMD_RESTART)
}
func (systemActions) Shutdown(ctx context.Context) error {
	return power(ctx, "poweroff", syscall.LINUX_REBOOT_CMD_POWER_OFF)
}

func power(ctx context.Context, verb string, cmd int) error {
	if path, err := exec.LookPath("systemctl"); err == nil {
		out, err := exec.CommandContext(ctx, path, verb).CombinedOutput()
		if err != nil {
			return fmt.Errorf("systemctl %s: %v: %s", verb, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	syscall.Sync()
	if err := syscall.Reboot(cmd); err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	return nil
}

// rootHealth is the node's health as the agent sees it: the root file
// system nearly full degrades the node (under 10 % free) or makes it
// unhealthy (under 2 %), the usual cause of edge services failing.
func rootHealth(path string) *hostv1.Health {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil || st.Blocks == 0 {
		return &hostv1.Health{State: hostv1.Health_STATE_HEALTHY}
	}
	free := float64(st.Bavail) / float64(st.Blocks)
	detail := fmt.Sprintf("%s is %.0f%% full", path, 100*(1-free))
	switch {
	case free < 0.02:
		return &hostv1.Health{State: hostv1.Health_STATE_UNHEALTHY, Detail: detail}
	case free < 0.10:
		return &hostv1.Health{State: hostv1.Health_STATE_DEGRADED, Detail: detail}
	}
	return &hostv1.Health{State: hostv1.Health_STATE_HEALTHY}
}
