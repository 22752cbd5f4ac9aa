package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/server"
	"github.com/eimhq/eim/sqlstore"
)

// token runs "eim token create": it mints a token with the signing key of a
// server's data directory. Project roles carry the project's ID (as the
// original's Keycloak roles do), so the command looks the project up in the
// server's database (with the original's other project roles, which its
// web UI looks for: eim.ProjectRoles); it does not fall back to name-based roles, because a
// project deleted and created again under the same name must not inherit
// old tokens.
func (c *cli) token(args []string) error {
	if len(args) == 0 || args[0] != "create" {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(c.stdout, "Usage:\n  eim token create --project P --role r|rw [--ttl 24h] [--subject S] [--data-dir D | --signing-key F]\n  eim token create --admin [--ttl 24h] [--subject S] [--data-dir D | --signing-key F]\n")
			return nil
		}
		return usagef("token: unknown verb %q (create)", args[0])
	}
	fs := c.flagSet("eim token create", "eim token create (--project P --role r|rw | --admin) [flags]",
		"Mints a bearer token signed with the server's key from its data directory. The token is the\n"+
			"last line of the output. Project roles name the project's ID, read from the server's database:\n"+
			"r gives <id>_im-r and the original web UI's other read roles (_cl-r, _cl-tpl-r, _alrt-r, _cat-r, _tc-r),\n"+
			"rw gives <id>_im-rw, _im-r and its write roles (_cl-rw, _cl-tpl-rw, _alrt-rw, _cat-rw, _ao-rw, _tc-r).")
	var (
		dataDir, database, project, role, subject, keyFile string
		admin                                              bool
		ttl                                                time.Duration
	)
	fs.StringVar(&dataDir, "data-dir", defaultDataDir, "the server's data directory (signing key, SQLite database)")
	fs.StringVar(&keyFile, "signing-key", "", "the server's --signing-key file, when it has one (a Kubernetes deployment's Secret) instead of <data-dir>/signing.key")
	fs.StringVar(&database, "database", c.getenv("EIM_DATABASE"), "the server's database if not SQLite in the data dir (env EIM_DATABASE)")
	fs.StringVar(&project, "project", orDefault(c.g.project, eim.DefaultProject), "project the role is for")
	fs.StringVar(&role, "role", "", "r (read) or rw (read and write)")
	fs.BoolVar(&admin, "admin", false, "grant the eim-admin role (everything) instead of a project role")
	fs.DurationVar(&ttl, "ttl", 24*time.Hour, "lifetime")
	fs.StringVar(&subject, "subject", "", "subject (sub) of the token (default: derived from the role)")
	pos, err := c.parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("token create", pos, 0, "no arguments"); err != nil {
		return err
	}
	if ttl <= 0 {
		return usagef("--ttl: must be positive")
	}
	var roles []string
	switch {
	case admin && role != "":
		return usagef("token create: --admin and --role exclude each other")
	case admin:
		roles = []string{eim.RoleAdmin}
		subject = orDefault(subject, "admin")
	case role == "r" || role == "rw":
		proj, err := c.lookupProject(dataDir, database, project)
		if err != nil {
			return err
		}
		roles = eim.ProjectRoles(proj, role == "rw")
		subject = orDefault(subject, project+"-"+role)
	case role == "":
		return usagef("token create: --role r|rw (with --project) or --admin is required")
	default:
		return usagef("--role %q: want r or rw", role)
	}

	if _, err := os.Stat(filepath.Join(dataDir, auth.KeyFile)); keyFile == "" && errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("no signing key in %s: start the server once with --data-dir %s, or pass the right --data-dir (or --signing-key)", dataDir, dataDir)
	}
	iss, err := server.LoadIssuer(dataDir, keyFile)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	tok, err := iss.Mint(subject, roles, ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "token for %s with roles %s, valid until %s:\n", subject, strings.Join(roles, ","), time.Now().Add(ttl).UTC().Format(time.RFC3339))
	fmt.Fprintln(c.stdout, tok)
	return nil
}

// lookupProject finds the project in the server's database. A SQLite file
// must already exist: opening a missing one would create an empty database.
func (c *cli) lookupProject(dataDir, database, name string) (*eim.Project, error) {
	dsn := server.DatabaseDSN(dataDir, database)
	if !server.IsPostgres(dsn) {
		path := strings.TrimPrefix(dsn, "sqlite:")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no database at %s (start the server once, or pass --data-dir / --database): %w", path, err)
		}
	}
	store, err := sqlstore.Open(c.ctx, dsn, sqlstore.Options{})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", server.RedactDSN(dsn), err)
	}
	defer store.Close()
	p, err := store.FindProject(c.ctx, name)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil, eim.Errorf(eim.ENOTFOUND, "project %q not found (create it with: eim project create %s)", name, name)
	}
	if err != nil {
		return nil, fmt.Errorf("find project %s: %w", name, err)
	}
	return p, nil
}
