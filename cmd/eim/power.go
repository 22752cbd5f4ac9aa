package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/oob"
)

// eim host power HOST on|off|reset|cycle, eim host jobs HOST: power through
// a host's BMC (the oob module's jobs).

var powerStates = map[string]eim.PowerState{
	"on": eim.PowerStateOn, "off": eim.PowerStateOff, "reset": eim.PowerStateReset, "cycle": eim.PowerStatePowerCycle,
	"reset-repeat": eim.PowerStateResetRepeat, "sleep": eim.PowerStateSleep, "hibernate": eim.PowerStateHibernate,
}

func (c *cli) hostPower(args []string) error {
	var boot string
	var once bool
	fs := c.flagSet("eim host power", "eim host power HOST on|off|reset|cycle|reset-repeat|sleep|hibernate [--boot pxe|http|cd|disk|bios [--once]]",
		"Adds a power job through the host's BMC (and sets its desiredPowerState); the job is followed with `eim host jobs HOST`.")
	c.globalFlags(fs)
	fs.StringVar(&boot, "boot", "", "a boot override set before the power action: pxe, http, cd, disk or bios")
	fs.BoolVar(&once, "once", false, "the boot override is for the next boot only")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("host power", pos, 2, "a host ID and a power state"); err != nil {
		return err
	}
	state, ok := powerStates[strings.ToLower(pos[1])]
	if !ok {
		return usagef("host power: %q is not one of on, off, reset, cycle, reset-repeat, sleep, hibernate", pos[1])
	}
	if once && boot == "" {
		return usagef("host power: --once goes with --boot")
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	j, err := cl.RequestPower(c.ctx, c.g.project, pos[0], client.PowerRequest{DesiredPowerState: state, Boot: strings.ToUpper(boot), BootOnce: once})
	if err != nil {
		return err
	}
	return c.printJobs([]*client.PowerJob{j})
}

// hostProvision: eim host provision HOST, Day 0 started through the
// host's BMC (a network-boot job: one-time network boot, power on or
// reset, wait for the node to call home, clear the boot override).
func (c *cli) hostProvision(args []string) error {
	fs := c.flagSet("eim host provision", "eim host provision HOST [--boot network|virtual-media]",
		"Boots the host from the network through its BMC (one-time PXE, or UEFI HTTP boot; on if off, reset if on) so that it onboards and provisions; the job ends when the node has called home and the boot override is cleared (`eim host jobs HOST`).\n"+
			"With --boot virtual-media, from EIM's micro-OS CD image instead, inserted as the BMC's virtual CD (for sites without PXE; the server's --oob-virtual-media-url), ejected once the node has called home.")
	c.globalFlags(fs)
	var boot string
	fs.StringVar(&boot, "boot", "network", "how the host boots EIM's micro-OS: network or virtual-media")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	var kind string
	switch strings.ToLower(boot) {
	case "network":
		kind = "NETWORK"
	case "virtual-media", "cd":
		kind = "VIRTUAL_MEDIA"
	default:
		return usagef("host provision: --boot %q: want network or virtual-media", boot)
	}
	if err := wantArgs("host provision", pos, 1, "one host ID"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	j, err := cl.RequestPower(c.ctx, c.g.project, pos[0], client.PowerRequest{DesiredPowerState: eim.PowerStateOn, Boot: kind})
	if err != nil {
		return err
	}
	return c.printJobs([]*client.PowerJob{j})
}

func (c *cli) hostJobs(args []string) error {
	var size, offset int
	fs := c.flagSet("eim host jobs", "eim host jobs HOST [--page-size N] [--offset N]", "Lists the host's power jobs through its BMC, newest first.")
	c.globalFlags(fs)
	fs.IntVar(&size, "page-size", 20, "jobs per page (1..100)")
	fs.IntVar(&offset, "offset", 0, "jobs to skip")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("host jobs", pos, 1, "one host ID"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	list, err := cl.PowerJobs(c.ctx, c.g.project, pos[0], size, offset)
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(list)
	}
	return c.printJobs(list.Jobs)
}

func (c *cli) printJobs(jobs []*client.PowerJob) error {
	switch c.g.output {
	case "json":
		if len(jobs) == 1 {
			return c.printJSON(jobs[0])
		}
		return c.printJSON(jobs)
	case "id":
		for _, j := range jobs {
			fmt.Fprintln(c.stdout, j.JobID)
		}
		return nil
	}
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		var steps []string
		for _, s := range j.Steps {
			name := s.Action
			switch s.Kind {
			case eim.PowerStepSetBoot:
				name = "boot " + s.Boot
			case oob.StepBootPower:
				if name == "" {
					name = "ON or RESET"
				}
			case oob.StepCallHome:
				name = "call home"
			case oob.StepClearBoot:
				name = "clear boot"
			case oob.StepInsertMedia:
				name = "insert CD"
			case oob.StepEjectMedia:
				name = "eject CD"
			}
			switch {
			case s.Done:
				name += " ok"
			case s.Skipped:
				name += " skipped"
			}
			if s.Sends > 1 {
				name += " (sent " + strconv.Itoa(s.Sends) + "x)"
			}
			steps = append(steps, name)
		}
		rows = append(rows, []string{j.JobID, strings.TrimPrefix(string(j.Desired), "POWER_STATE_"), j.State, strings.Join(steps, ", "),
			strconv.Itoa(j.Attempts), j.Timestamps.CreatedAt.Format("2006-01-02 15:04:05"), j.LastError})
	}
	return c.printTable([]string{"JOB", "POWER", "STATE", "STEPS", "ATTEMPTS", "CREATED", "LAST ERROR"}, rows)
}
