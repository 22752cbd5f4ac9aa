package main

import (
	"fmt"
	"time"
)

// project runs "eim project list|create|delete".
func (c *cli) project(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, "Usage:\n  eim project list\n  eim project create NAME\n  eim project delete NAME [--force]\n\nProject administration needs the eim-admin role.\n")
		return nil
	}
	verb, rest := args[0], args[1:]
	fs := c.flagSet("eim project "+verb, "eim project "+verb+" …", "")
	c.globalFlags(fs)
	var force bool
	if verb == "delete" {
		fs.BoolVar(&force, "force", false, "also delete every resource in the project")
	}
	pos, err := c.parseAll(fs, rest)
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		err = wantArgs(verb, pos, 0, "no arguments")
	case "create", "delete":
		err = wantArgs(verb, pos, 1, "a project name")
	default:
		return usagef("project: unknown verb %q (list, create, delete)", verb)
	}
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		p, err := cl.CreateProject(c.ctx, pos[0])
		if err != nil {
			return err
		}
		switch c.g.output {
		case "json":
			return c.printJSON(p)
		case "id":
			fmt.Fprintln(c.stdout, p.ID)
			return nil
		}
		return c.printTable([]string{"NAME", "ID", "CREATED"}, [][]string{{p.Name, p.ID, p.CreatedAt.Format(time.RFC3339)}})
	case "delete":
		if err := cl.DeleteProject(c.ctx, pos[0], force); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "deleted project %s\n", pos[0])
		return nil
	}
	ps, err := cl.ListProjects(c.ctx)
	if err != nil {
		return err
	}
	switch c.g.output {
	case "json":
		return c.printJSON(ps)
	case "id":
		for _, p := range ps {
			fmt.Fprintln(c.stdout, p.ID)
		}
		return nil
	}
	rows := make([][]string, len(ps))
	for i, p := range ps {
		rows[i] = []string{p.Name, p.ID, p.CreatedAt.Format(time.RFC3339)}
	}
	return c.printTable([]string{"NAME", "ID", "CREATED"}, rows)
}
