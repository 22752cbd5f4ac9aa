// Command eim is the EIM server and its command-line client.
//
//	eim server                     run the inventory, the REST API and the agents' API
//	eim token create …             mint a bearer token with the server's key
//	eim project list|create|delete administer projects (tenants)
//	eim <noun> list|get|create|update|patch|delete
//	                               resources of a project, over the API
//
// Run "eim help" for the nouns and the global flags.
//
// # Server
//
// "eim server" keeps its state in --data-dir (default ./eim-data): the
// SQLite database eim.db (unless --database names a PostgreSQL URL), the
// token signing key signing.key (Ed25519, mode 0600) and admin.token. On
// first start (no project at all) it creates the project "default"; at
// every start it makes sure admin.token holds a valid token with the
// eim-admin role, valid for one year, and rewrites it only when it no
// longer verifies. It prints "eim: serving API on http://ADDR" with the
// bound address (so --http-addr 127.0.0.1:0 works) and stops gracefully on
// SIGINT or SIGTERM. With --oidc-issuer (and optionally --jwks-url) it also
// accepts the access tokens of an external OIDC provider such as Keycloak;
// its keys are fetched at start (a wrong URL stops the start) and again when
// a token names an unknown key, at most every 30 s.
//
// The server also listens for the nodes' agents on --agent-addr (default
// 127.0.0.1:8443, HTTPS): the token endpoint /oauth2/token and the Connect
// services of proto/ (onboarding, provisioning, host). Its certificate is
// signed by a CA the server creates in the data directory (ca.crt, ca.key;
// server.crt, server.key renewed when near their end or when the names
// change), unless --tls-cert and --tls-key (and --tls-ca, the root nodes
// pin) name the operator's. It prints "eim: serving agents on https://ADDR
// (CA fingerprint sha256:HEX)". --agent-url is the URL nodes are given
// (default https://<agent-addr>). The API listener serves the network boot
// under /boot/ too, with the micro-OS from --boot-artifacts (default
// <data-dir>/boot).
//
// # Environment
//
// Only this command reads the environment: EIM_SERVER (the --server
// default), EIM_TOKEN (a bearer token, used when --token-file is not
// given) and EIM_DATABASE (the --database default of server and token
// create).
//
// # Tokens
//
// "eim token create --project P --role r|rw" mints a token whose role
// names the project's ID ("<id>_im-r" or "<id>_im-rw"), read from the
// server's database in the data directory; "--admin" mints an eim-admin
// token. The token is the last line of standard output.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/eimhq/eim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "eim: "+errorText(err))
		var u *usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// errorText is what the user sees of err: the message of an *eim.Error
// (the server's, for API errors), else the error's own text.
func errorText(err error) string {
	var e *eim.Error
	if errors.As(err, &e) && errors.Unwrap(err) == nil {
		return e.Message
	}
	if errors.As(err, &e) {
		// Wrapped: keep the context, drop the "eim: code:" prefix.
		return replaceSuffix(err.Error(), e.Error(), e.Message)
	}
	return err.Error()
}

func replaceSuffix(s, old, repl string) string {
	if len(s) >= len(old) && s[len(s)-len(old):] == old {
		return s[:len(s)-len(old)] + repl
	}
	return s
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Main runs the eim command with args (without the program name), writing
// its output to stdout and diagnostics to stderr. It returns when the
// command is done or, for "eim server", when ctx is canceled.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &cli{ctx: ctx, stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	err := c.run(args)
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}
