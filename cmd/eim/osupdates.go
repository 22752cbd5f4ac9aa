package main

import (
	"fmt"
	"strconv"
)

// instanceUpdatesSummary runs "eim instance updates-summary": the
// project's instances by OS update state, per OS profile and in all.
func (c *cli) instanceUpdatesSummary(args []string) error {
	fs := c.flagSet("eim instance updates-summary", "eim instance updates-summary [--filter F]", "")
	c.globalFlags(fs)
	var filter string
	fs.StringVar(&filter, "filter", "", "AIP-160 filter over instances, e.g. 'host.site.resourceId=\"site-…\"'")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("updates-summary", pos, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	s, err := cl.UpdatesSummary(c.ctx, c.g.project, filter)
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(s)
	}
	n := strconv.Itoa
	var rows [][]string
	for _, o := range s.OperatingSystems {
		rows = append(rows, []string{o.OSResourceID, o.Name, n(o.Total), n(o.UpToDate), n(o.Updating), n(o.Failed), n(o.Unknown), n(o.OSUpdateAvailable)})
	}
	rows = append(rows, []string{"(all)", "", n(s.Total), n(s.UpToDate), n(s.Updating), n(s.Failed), n(s.Unknown), n(s.OSUpdateAvailable)})
	if c.g.output == "id" {
		for _, o := range s.OperatingSystems {
			fmt.Fprintln(c.stdout, o.OSResourceID)
		}
		return nil
	}
	return c.printTable([]string{"OS", "NAME", "TOTAL", "UP-TO-DATE", "UPDATING", "FAILED", "UNKNOWN", "UPDATE-AVAILABLE"}, rows)
}
