package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/eimhq/eim/client"
)

// eim host bmc set|get|delete: a host's BMC (the oob module).

const bmcUsage = `Usage:
  eim host bmc set HOST --protocol REDFISH|IPMI|AMT --address A --username U
                   [--password-stdin | --password P] [--system-id S] [--ca-cert FILE | --insecure]
                   [--power-policy ALWAYS_ON|REPORT]
  eim host bmc get HOST
  eim host bmc delete HOST

set creates or replaces the host's BMC; without a password a replace keeps the
stored one. --password-stdin reads the password from standard input (one line);
--password shows it to other users of the machine (ps): prefer stdin.
`

func (c *cli) hostBMC(args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(c.stdout, bmcUsage)
		if len(args) == 0 {
			return usagef("host bmc: a verb is required (set, get, delete)")
		}
		return nil
	}
	switch verb, rest := args[0], args[1:]; verb {
	case "set":
		return c.bmcSet(rest)
	case "get":
		return c.bmcGet(rest)
	case "delete":
		return c.bmcDelete(rest)
	default:
		return usagef("host bmc: unknown verb %q (set, get, delete)", verb)
	}
}

// bmcHost parses "eim host bmc VERB HOST" with optional extra flags.
func (c *cli) bmcHost(verb string, args []string, extra func(*flag.FlagSet)) (string, error) {
	fs := c.flagSet("eim host bmc "+verb, "eim host bmc "+verb+" HOST", "")
	c.globalFlags(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return "", err
	}
	if err := wantArgs("bmc "+verb, pos, 1, "one host ID"); err != nil {
		return "", err
	}
	return pos[0], nil
}

func (c *cli) bmcSet(args []string) error {
	var (
		in               client.BMCInput
		password, caFile string
		fromStdin        bool
	)
	host, err := c.bmcHost("set", args, func(fs *flag.FlagSet) {
		fs.StringVar(&in.Protocol, "protocol", "", "REDFISH, IPMI or AMT")
		fs.StringVar(&in.Address, "address", "", "host[:port], or an https URL (Redfish, AMT)")
		fs.StringVar(&in.SystemID, "system-id", "", "the Redfish system (default: the BMC's only one)")
		fs.StringVar(&in.Username, "username", "", "the BMC account")
		fs.StringVar(&password, "password", "", "the account's password (visible in ps: prefer --password-stdin)")
		fs.BoolVar(&fromStdin, "password-stdin", false, "read the password from standard input")
		fs.StringVar(&caFile, "ca-cert", "", "PEM file of the CAs the BMC's TLS certificate is checked against")
		fs.BoolVar(&in.Insecure, "insecure", false, "do not check the BMC's TLS certificate")
		fs.StringVar(&in.PowerPolicy, "power-policy", "", "ALWAYS_ON: power the host on again when found off while asked to be on; REPORT: show it only (default: the site's, else the project's)")
	})
	if err != nil {
		return err
	}
	if in.Password, err = c.secretArg("bmc set", "password", password, fromStdin); err != nil {
		return err
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return usagef("--ca-cert: %v", err)
		}
		in.CACert = string(b)
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	b, err := cl.PutBMC(c.ctx, c.g.project, host, in)
	if err != nil {
		return err
	}
	return c.printBMC(b)
}

func (c *cli) bmcGet(args []string) error {
	host, err := c.bmcHost("get", args, nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	b, err := cl.GetBMC(c.ctx, c.g.project, host)
	if err != nil {
		return err
	}
	return c.printBMC(b)
}

func (c *cli) bmcDelete(args []string) error {
	host, err := c.bmcHost("delete", args, nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	if err := cl.DeleteBMC(c.ctx, c.g.project, host); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "deleted the BMC of %s\n", host)
	return nil
}

// secretArg is a secret given as --NAME VALUE or --NAME-stdin (one line of
// standard input): nil when neither was given.
func (c *cli) secretArg(cmd, name, value string, fromStdin bool) (*string, error) {
	switch {
	case fromStdin && value != "":
		return nil, usagef("%s: give --%s or --%s-stdin, not both", cmd, name, name)
	case fromStdin:
		b, err := c.readStdin()
		if err != nil {
			return nil, fmt.Errorf("read the %s: %w", name, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return nil, usagef("%s: --%s-stdin: standard input is empty", cmd, name)
		}
		return &v, nil
	case value != "":
		return &value, nil
	}
	return nil, nil
}

func (c *cli) printBMC(b *client.BMC) error {
	switch c.g.output {
	case "json":
		return c.printJSON(b)
	case "id":
		fmt.Fprintln(c.stdout, b.HostID)
		return nil
	}
	tls := "system roots"
	switch {
	case b.Protocol == "IPMI":
		tls = "-"
	case b.Insecure:
		tls = "insecure"
	case b.CACert != "":
		tls = "CA bundle"
	}
	reach := b.Reachable.Status
	if reach == "" {
		reach = "not checked"
	}
	return c.printTable([]string{"HOST", "PROTOCOL", "ADDRESS", "SYSTEM", "USERNAME", "PASSWORD", "TLS", "POWER-POLICY", "REACHABLE"},
		[][]string{{b.HostID, b.Protocol, b.Address, cmp.Or(b.SystemID, "-"), b.Username, map[bool]string{true: "set", false: "none"}[b.PasswordSet], tls,
			cmp.Or(b.PowerPolicy, "-"), reach}})
}
