package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eimhq/eim/client"
)

// Defaults shared by the server and the client commands.
const (
	defaultDataDir = "eim-data"
	defaultServer  = "http://127.0.0.1:8080"
	adminTokenFile = "admin.token"
)

// cli is one invocation of the command.
type cli struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	g     globals
	helps map[*flag.FlagSet]func() // help printers of the flag sets
	hc    *http.Client             // made by clientFor; idle connections closed by Main
}

// globals are the flags every client command takes, before or after the
// command words.
type globals struct {
	server    string
	tokenFile string
	project   string
	output    string
}

func (c *cli) globalFlags(fs *flag.FlagSet) {
	server := c.getenv("EIM_SERVER")
	if c.g.server != "" {
		server = c.g.server
	}
	if server == "" {
		server = defaultServer
	}
	fs.StringVar(&c.g.server, "server", server, "base URL of the eim server (env EIM_SERVER)")
	fs.StringVar(&c.g.tokenFile, "token-file", c.g.tokenFile, "file holding the bearer token (default: env EIM_TOKEN, else ./"+defaultDataDir+"/"+adminTokenFile+")")
	fs.StringVar(&c.g.project, "project", orDefault(c.g.project, "default"), "project to work in")
	fs.StringVar(&c.g.output, "o", orDefault(c.g.output, "table"), "output format: table, json or id")
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (c *cli) run(args []string) error {
	fs := c.flagSet("eim", "eim [global flags] <command> …", usageText)
	c.globalFlags(fs)
	rest, err := c.parseLeading(fs, args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		fmt.Fprint(c.stdout, usageText)
		return nil
	}
	cmd, rest := rest[0], rest[1:]
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, usageText)
		return nil
	case "server":
		return c.server(rest)
	case "token":
		return c.token(rest)
	case "project":
		return c.project(rest)
	case "connect":
		return c.connect(rest)
	case "cluster":
		return c.cluster(rest)
	case "cluster-template":
		return c.clusterTemplate(rest)
	case "audit":
		return c.audit(rest)
	case "enrollment":
		return c.enrollment(rest)
	case "webhook":
		return c.webhook(rest)
	case "edgeworkload":
		return c.edgeWorkload(rest)
	case "objectstorage":
		return c.objectStorage(rest)
	case "microos":
		return c.microos(rest)
	case "testos":
		return c.testos(rest)
	case "secureboot":
		return c.secureboot(rest)
	}
	if n := findNoun(cmd); n != nil {
		return c.resource(n, rest)
	}
	return usagef("unknown command %q (run \"eim help\")", cmd)
}

const usageText = `eim — Edge Infrastructure Manager server and CLI

Usage:
  eim server [flags]                       run the server (eim server -h)
  eim token create [flags]                 mint a bearer token (eim token create -h)
  eim project list | create NAME | delete NAME [--force] | get NAME
  eim project set NAME [--default-os ID|none] [--default-local-account ID|none]
                  [--default-custom-configs ID,ID|none] [--enrollment-token new|none]
                  [--auto-onboard-enrolled=true|false]   (eim project -h)
  eim <noun> list [--filter F] [--order-by O] [--page-size N] [--offset N]
  eim <noun> get ID
  eim <noun> create [field flags] [--file F.json | -f -]
  eim <noun> update ID --file F.json        (PUT: replaces the writable fields)
  eim <noun> patch ID --set field=value …   (PATCH: changes only those fields)
  eim <noun> delete ID …
  eim host register --serial S | --uuid U [--name N] [--auto-onboard]
  eim host import FILE.csv [--check] [--site S] [--os-profile O] …   bulk registration (eim host import -h)
  eim host onboard ID | invalidate ID [--note N] | summary [--filter F]
  eim edgeworkload apply -f FILE | list | get NAME | delete NAME | status NAME | logs NAME --host H
                                           edge workloads on devices (eim edgeworkload -h)
  eim instance log ID [-f]                 provisioning log; -f follows it to the end
  eim instance reprovision ID [-f]         retry a failed provisioning (new attempt); -f follows it
  eim instance recovery-key ID             the recovery key of its encrypted disk (admins; audited)
  eim instance updates-summary [--filter F]  instances by OS update state, per OS profile
  eim connect token CLUSTER --out F | revoke CLUSTER | status [CLUSTER] | kubeconfig CLUSTER --out F
                                           an edge cluster's connect tunnel (eim connect -h)
  eim cluster list | get | create --node HOST[:ROLE]… | delete | nodes add|remove | upgrade | kubeconfig
                                           edge Kubernetes clusters built from hosts (eim cluster -h)
  eim cluster-template list | get | create FILE | delete | set-default
                                           their templates (eim cluster-template -h)
  eim audit list [--resource ID] [--since 1h] [-f]   who changed what (eim audit -h)
  eim objectstorage set --endpoint URL --bucket B --access-key-id K --secret-key-stdin …
                  | get | delete          the project's object storage for devices' data
  eim enrollment list | get | approve ID [--label k=v] | deny ID [--reason R] | delete | rules …
                                           the enrollment lobby of unknown devices (eim enrollment -h)
  eim webhook list | get ID | create --url U --events E,E | update ID … | delete ID | deliveries ID
  eim microos build [flags]                build the network-boot micro-OS (eim microos build -h)
  eim testos build --out F [--register …]  build a small bootable test OS image (eim testos build -h)
  eim secureboot export --out DIR [--kek-key F --kek-cert F]   the Secure Boot db certificate to enroll (eim secureboot -h)

Nouns: region site host instance os provider schedule-single
       schedule-repeated localaccount customconfig telemetry-loggroup
       telemetry-metricgroup telemetry-logprofile telemetry-metricprofile
       os-update-policy os-update-run workload workload-member

Global flags (before or after the command):
  --server URL       base URL of the server (env EIM_SERVER; default http://127.0.0.1:8080)
  --token-file PATH  bearer token file (default: env EIM_TOKEN holding the token,
                     else ./eim-data/admin.token when readable)
  --project NAME     project (default "default")
  -o FORMAT          table (default), json, or id (IDs only, one per line)
`

// flagSet returns a flag set that reports errors as usage errors and
// prints its help to stdout on -h.
func (c *cli) flagSet(name, synopsis, intro string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // flag calls it on every error; help is printed by flagError
	if c.helps == nil {
		c.helps = map[*flag.FlagSet]func(){}
	}
	c.helps[fs] = func() {
		if intro == usageText {
			fmt.Fprint(c.stdout, usageText)
			return
		}
		if intro != "" {
			fmt.Fprintln(c.stdout, intro)
		}
		fmt.Fprintf(c.stdout, "Usage: %s\n\nFlags:\n", synopsis)
		fs.SetOutput(c.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// errHelp is returned after printing help; run turns it into success.
var errHelp = flag.ErrHelp

// parseLeading parses flags up to the first non-flag argument.
func (c *cli) parseLeading(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, c.flagError(fs, err)
	}
	return fs.Args(), nil
}

// parseAll parses flags anywhere among args ("get ID -o json" as well as
// "get -o json ID") and returns the positional arguments.
func (c *cli) parseAll(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, c.flagError(fs, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at "--" (consumed) or at a non-flag: tell them apart.
		if len(args) >= len(rest)+1 && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c *cli) flagError(fs *flag.FlagSet, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		if help := c.helps[fs]; help != nil {
			help()
		}
		return errHelp
	}
	return usagef("%s: %v", fs.Name(), err)
}

// wantArgs checks the number of positional arguments.
func wantArgs(cmd string, pos []string, n int, names string) error {
	if len(pos) != n {
		return usagef("%s: want %s, got %d argument(s)", cmd, names, len(pos))
	}
	return nil
}

// clientFor checks the global flags and returns an API client for them.
func (c *cli) clientFor() (*client.Client, error) {
	if err := c.checkOutput(); err != nil {
		return nil, err
	}
	tok, err := c.bearerToken()
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(c.g.server, "http://") && !strings.HasPrefix(c.g.server, "https://") {
		return nil, usagef("--server %q: want an http:// or https:// URL", c.g.server)
	}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: 60 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return client.New(c.g.server, tok, c.hc), nil
}

// bearerToken finds the token: --token-file, then EIM_TOKEN, then the
// admin token of a server run from the current directory.
func (c *cli) bearerToken() (string, error) {
	if c.g.tokenFile != "" {
		b, err := os.ReadFile(c.g.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if t := strings.TrimSpace(c.getenv("EIM_TOKEN")); t != "" {
		return t, nil
	}
	if b, err := os.ReadFile(filepath.Join(defaultDataDir, adminTokenFile)); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	return "", usagef("no token: pass --token-file, set EIM_TOKEN, or run from the directory holding %s/%s", defaultDataDir, adminTokenFile)
}

// checkOutput validates -o.
func (c *cli) checkOutput() error {
	switch c.g.output {
	case "table", "json", "id":
		return nil
	}
	return usagef("-o %q: want table, json or id", c.g.output)
}

// printJSON writes v, or raw JSON as the server sent it, indented.
func (c *cli) printJSON(v any) error {
	var buf bytes.Buffer
	if raw, ok := v.(json.RawMessage); ok {
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
	} else {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		buf.Write(b)
	}
	buf.WriteByte('\n')
	_, err := c.stdout.Write(buf.Bytes())
	return err
}

// printTable writes rows under headers, aligned.
func (c *cli) printTable(headers []string, rows [][]string) error {
	tw := newTab(c.stdout)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, r := range rows {
		for i := range r {
			if r[i] == "" {
				r[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func newTab(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }
