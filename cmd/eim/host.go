package main

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/eimhq/eim/client"
)

// The host verbs beyond CRUD: register, onboard, invalidate, summary.

func (c *cli) hostRegister(args []string) error {
	fs := c.flagSet("eim host register", "eim host register --serial S | --uuid U [flags]", "Pre-register a host by serial number and/or UUID.")
	c.globalFlags(fs)
	var reg client.HostRegistration
	var lvm uint
	fs.StringVar(&reg.Name, "name", "", "host name")
	fs.StringVar(&reg.SerialNumber, "serial", "", "serial number (5 to 20 letters and digits)")
	fs.StringVar(&reg.UUID, "uuid", "", "SMBIOS UUID")
	fs.BoolVar(&reg.AutoOnboard, "auto-onboard", false, "onboard as soon as the node calls home")
	fs.BoolVar(&reg.EnableVpro, "enable-vpro", false, "provision Intel vPro AMT")
	fs.UintVar(&lvm, "user-lvm-size", 0, "LVM size for users in GB")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("register", pos, 0, "no arguments"); err != nil {
		return err
	}
	if reg.SerialNumber == "" && reg.UUID == "" {
		return usagef("register: --serial or --uuid is required")
	}
	if lvm > 1<<32-1 {
		return usagef("--user-lvm-size: %d is too large", lvm)
	}
	reg.UserLvmSize = uint32(lvm)
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	h, err := cl.RegisterHost(c.ctx, c.g.project, reg)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	n := findNoun("host")
	if c.g.output == "table" {
		return c.printRows(n, []json.RawMessage{raw})
	}
	return c.printOne(n, raw)
}

// hostAction parses "eim host VERB ID" with optional extra flags.
func (c *cli) hostAction(verb string, args []string, extra func(*flag.FlagSet)) (string, error) {
	fs := c.flagSet("eim host "+verb, "eim host "+verb+" ID", "")
	c.globalFlags(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return "", err
	}
	if err := wantArgs(verb, pos, 1, "one host ID"); err != nil {
		return "", err
	}
	return pos[0], nil
}

func (c *cli) hostOnboard(args []string) error {
	id, err := c.hostAction("onboard", args, nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	if err := cl.OnboardHost(c.ctx, c.g.project, id); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "onboarding %s\n", id)
	return nil
}

func (c *cli) hostInvalidate(args []string) error {
	var note string
	id, err := c.hostAction("invalidate", args, func(fs *flag.FlagSet) {
		fs.StringVar(&note, "note", "", "reason, kept on the host")
	})
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	if err := cl.InvalidateHost(c.ctx, c.g.project, id, note); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "invalidated %s\n", id)
	return nil
}

func (c *cli) hostSummary(args []string) error {
	fs := c.flagSet("eim host summary", "eim host summary [--filter F]", "")
	c.globalFlags(fs)
	var filter string
	fs.StringVar(&filter, "filter", "", "AIP-160 filter over hosts")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("summary", pos, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	s, err := cl.HostSummary(c.ctx, c.g.project, filter)
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(s)
	}
	return c.printTable([]string{"TOTAL", "RUNNING", "ERROR", "UNALLOCATED"},
		[][]string{{fmt.Sprint(s.Total), fmt.Sprint(s.Running), fmt.Sprint(s.Error), fmt.Sprint(s.Unallocated)}})
}
