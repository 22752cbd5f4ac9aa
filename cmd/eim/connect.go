package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/eimhq/eim/server"
)

const connectUsage = `Usage:
  eim connect token CLUSTER --out FILE [--ttl 720h] [--grace 10m] [--print]
  eim connect revoke CLUSTER
  eim connect status [CLUSTER]
  eim connect kubeconfig CLUSTER --out FILE

The connect tunnel lets users reach an edge cluster's Kubernetes API through
EIM (docs/connect.md). "token" issues the cluster's connect token, which
eim-agent connect reads from its --token-file: it is written to --out
(mode 0600) and shown only with --print. The cluster's other tokens expire at
once, or after --grace. "revoke" makes every token of the cluster expire now.
"status" shows each cluster's tunnel: connected, last ping, agent version,
round-trip time. "kubeconfig" writes a kubeconfig that reaches the cluster
through the gateway with a short-lived token for you. Issuing and revoking
need the project's read-write role.
`

// connect runs "eim connect token|revoke|status|kubeconfig".
func (c *cli) connect(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, connectUsage)
		return nil
	}
	verb, rest := args[0], args[1:]
	fs := c.flagSet("eim connect "+verb, "eim connect "+verb+" …", "")
	c.globalFlags(fs)
	var out string
	var ttl, grace time.Duration
	var show bool
	switch verb {
	case "token":
		fs.StringVar(&out, "out", "", "file to write the token to (mode 0600; required)")
		fs.DurationVar(&ttl, "ttl", 0, "lifetime of the token (default: the server's, 30 days)")
		fs.DurationVar(&grace, "grace", 0, "how long the cluster's previous tokens stay valid (default: they expire now)")
		fs.BoolVar(&show, "print", false, "also print the token on standard output")
	case "kubeconfig":
		fs.StringVar(&out, "out", "", "file to write the kubeconfig to (mode 0600; required)")
	case "revoke", "status":
	default:
		return usagef("connect: unknown verb %q (token, revoke, status, kubeconfig)", verb)
	}
	pos, err := c.parseAll(fs, rest)
	if err != nil {
		return err
	}
	if verb == "status" {
		if len(pos) > 1 {
			return usagef("connect status: want at most a cluster name, got %d arguments", len(pos))
		}
	} else if err := wantArgs("connect "+verb, pos, 1, "a cluster name"); err != nil {
		return err
	}
	if (verb == "token" || verb == "kubeconfig") && out == "" {
		return usagef("connect %s: --out FILE is required (the secret is not printed unless --print)", verb)
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	switch verb {
	case "token":
		t, err := cl.IssueConnectToken(c.ctx, c.g.project, pos[0], ttl, grace)
		if err != nil {
			return err
		}
		if err := writeSecret(out, []byte(t.Token+"\n")); err != nil {
			return err
		}
		if show {
			fmt.Fprintln(c.stdout, t.Token)
		}
		fmt.Fprintf(c.stderr, "connect token %s of cluster %s written to %s (expires %s)\n", t.ID, t.Cluster, out, t.Expires.Format(time.RFC3339))
		return nil
	case "revoke":
		return cl.RevokeConnectTokens(c.ctx, c.g.project, pos[0])
	case "kubeconfig":
		kc, err := cl.Kubeconfig(c.ctx, c.g.project, pos[0])
		if err != nil {
			return err
		}
		return writeSecret(out, []byte(kc))
	}
	// status
	if len(pos) == 1 {
		cn, err := cl.ClusterConnection(c.ctx, c.g.project, pos[0])
		if err != nil {
			return err
		}
		if c.g.output == "json" {
			return c.printJSON(cn)
		}
		return c.printTable(connHeaders, [][]string{connRow(cn.Cluster, cn.Connected, cn.LastSeen, cn.AgentVersion, cn.RTTMillis, cn.Replica, cn.TokenExpires)})
	}
	cs, err := cl.ClusterConnections(c.ctx, c.g.project)
	if err != nil {
		return err
	}
	switch c.g.output {
	case "json":
		return c.printJSON(cs)
	case "id":
		for _, cn := range cs {
			fmt.Fprintln(c.stdout, cn.Cluster)
		}
		return nil
	}
	rows := make([][]string, 0, len(cs))
	for _, cn := range cs {
		rows = append(rows, connRow(cn.Cluster, cn.Connected, cn.LastSeen, cn.AgentVersion, cn.RTTMillis, cn.Replica, cn.TokenExpires))
	}
	return c.printTable(connHeaders, rows)
}

var connHeaders = []string{"CLUSTER", "CONNECTED", "LAST SEEN", "AGENT", "RTT", "REPLICA", "TOKEN EXPIRES"}

func connRow(cluster string, connected bool, seen *time.Time, version string, rtt float64, replica string, expires *time.Time) []string {
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	r := ""
	if seen != nil {
		r = strconv.FormatFloat(rtt, 'f', 2, 64) + " ms"
	}
	return []string{cluster, strconv.FormatBool(connected), ts(seen), version, r, replica, ts(expires)}
}

// writeSecret writes a token or kubeconfig readable by its owner only.
func writeSecret(path string, b []byte) error {
	if err := server.WriteFileAtomic(path, b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
