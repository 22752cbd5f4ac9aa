package main

import (
	"fmt"
	"time"
)

// eim host attestation-key get|reset: the TPM keys pinned to a host
// (docs/security.md).

const attestationKeyUsage = `Usage:
  eim host attestation-key get HOST
  eim host attestation-key reset HOST

get shows the TPM keys pinned to the host at its first verified quote (their
TPM names, since when) and what its endorsement key was believed on: its
maker's certificate (issuer and serial), or the first quote alone.
reset removes them, for a host whose TPM or board was replaced: its next
verified quote pins the keys it brings. Administrators (eim-admin) only;
the reset is recorded in the project's audit log.
`

func (c *cli) hostAttestationKey(args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(c.stdout, attestationKeyUsage)
		if len(args) == 0 {
			return usagef("host attestation-key: a verb is required (get, reset)")
		}
		return nil
	}
	verb, rest := args[0], args[1:]
	if verb != "get" && verb != "reset" {
		return usagef("host attestation-key: unknown verb %q (get, reset)", verb)
	}
	fs := c.flagSet("eim host attestation-key "+verb, "eim host attestation-key "+verb+" HOST", "")
	c.globalFlags(fs)
	pos, err := c.parseAll(fs, rest)
	if err != nil {
		return err
	}
	if err := wantArgs("attestation-key "+verb, pos, 1, "one host ID"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	host := pos[0]
	if verb == "reset" {
		if err := cl.ResetAttestationKey(c.ctx, c.g.project, host); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "reset the attestation key of %s: its next verified quote pins its TPM's keys\n", host)
		return nil
	}
	k, err := cl.AttestationKey(c.ctx, c.g.project, host)
	if err != nil {
		return err
	}
	switch c.g.output {
	case "json":
		return c.printJSON(k)
	case "id":
		fmt.Fprintln(c.stdout, k.AKName)
		return nil
	}
	issuer, serial := "-", "-"
	if k.EKCertificate != nil {
		issuer, serial = k.EKCertificate.Issuer, k.EKCertificate.Serial
	}
	if err := c.printTable([]string{"HOST", "AK", "EK", "PINNED", "TRUST", "EK-CERT-ISSUER", "EK-CERT-SERIAL"},
		[][]string{{k.HostID, k.AKName, k.EKName, k.PinnedAt.UTC().Format(time.RFC3339), k.Trust, issuer, serial}}); err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, k.TrustNote)
	return nil
}
