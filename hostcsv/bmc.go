package hostcsv

import (
	"fmt"
	"strings"

	"github.com/eimhq/eim"
)

// BMCColumns are EIM's columns of a host's BMC (the oob module's; see
// docs/oob.md). A line that fills any of them gets a BMC made with its
// host: BMCProtocol, BMCAddress, BMCUsername and BMCPassword are then
// required. BMCPassword is never the password itself — a file of hosts is
// copied around and kept — but where the importer reads it: env:NAME (an
// environment variable) or file:PATH (a file's content, its final line
// break dropped). BMCCACert is file:PATH of a PEM bundle; BMCInsecure is
// true or false.
var BMCColumns = []string{"BMCProtocol", "BMCAddress", "BMCUsername", "BMCPassword", "BMCSystemID", "BMCInsecure", "BMCCACert"}

// SecretReader returns what ref (env:NAME or file:PATH) holds.
type SecretReader func(ref string) (string, error)

// bmcColumn names the column of a BMC setting by its API field.
var bmcColumn = map[string]string{
	"protocol": "BMCProtocol", "address": "BMCAddress", "username": "BMCUsername", "password": "BMCPassword",
	"systemId": "BMCSystemID", "insecure": "BMCInsecure", "caCert": "BMCCACert",
}

// failField records err, an EINVALID naming an API field ("address: …"),
// under the field's column.
func (l *Line) failField(err error) {
	msg := eim.ErrorMessage(err)
	if f, rest, ok := strings.Cut(msg, ": "); ok && bmcColumn[f] != "" {
		l.Fail("%s: %s", bmcColumn[f], rest)
		return
	}
	l.Fail("BMC: %s", msg)
}

// secretRef checks a cell that must refer to a secret (env:NAME or
// file:PATH) rather than hold it, and reads it.
func secretRef(col, ref string, read SecretReader, fileOnly bool) (string, error) {
	kind, name, ok := strings.Cut(ref, ":")
	switch {
	case !ok || (kind != "env" && kind != "file") || (fileOnly && kind != "file"):
		if fileOnly {
			return "", fmt.Errorf("%s: want file:PATH of a PEM bundle", col)
		}
		// Never repeat the cell: it may be the password itself.
		return "", fmt.Errorf("%s: a password is not written in the file; give env:NAME or file:PATH, which the importer reads", col)
	case name == "":
		return "", fmt.Errorf("%s: %s: names nothing", col, kind)
	case read == nil:
		return "", fmt.Errorf("%s: %s is read by `eim host import` only; import this file with the CLI", col, ref)
	}
	v, err := read(ref)
	if err != nil {
		return "", fmt.Errorf("%s: %v", col, err)
	}
	return v, nil
}

// checkBMC checks the line's BMC columns and, when they are right, sets
// l.BMC.
func (l *Line) checkBMC(read SecretReader) {
	if l.BMCProtocol == "" && l.BMCAddress == "" && l.BMCUsername == "" && l.BMCPassword == "" && l.BMCSystemID == "" &&
		l.BMCInsecure == "" && l.BMCCACert == "" {
		return
	}
	before := len(l.Errs)
	for _, c := range []struct{ col, v string }{{"BMCProtocol", l.BMCProtocol}, {"BMCAddress", l.BMCAddress}, {"BMCUsername", l.BMCUsername}, {"BMCPassword", l.BMCPassword}} {
		if c.v == "" {
			l.Fail("%s: required with the other BMC columns", c.col)
		}
	}
	insecure, err := parseBool(l.BMCInsecure)
	if err != nil {
		l.Fail("BMCInsecure: %v", err)
	}
	var password, ca string
	if l.BMCPassword != "" {
		if password, err = secretRef("BMCPassword", l.BMCPassword, read, false); err != nil {
			l.Fail("%v", err)
		}
		password = strings.TrimRight(password, "\r\n")
	}
	if l.BMCCACert != "" {
		if ca, err = secretRef("BMCCACert", l.BMCCACert, read, true); err != nil {
			l.Fail("%v", err)
		}
	}
	if len(l.Errs) > before {
		return
	}
	b := &eim.BMC{Protocol: eim.BMCProtocol(strings.ToUpper(l.BMCProtocol)), Address: l.BMCAddress, SystemID: l.BMCSystemID,
		Username: l.BMCUsername, CACert: ca, Insecure: insecure}
	if err := b.Validate(); err != nil {
		l.failField(err)
		return
	}
	if err := eim.CheckBMCPassword(b.Protocol, password); err != nil {
		l.failField(err)
		return
	}
	l.BMC = &eim.BMCInput{Protocol: string(b.Protocol), Address: b.Address, SystemID: b.SystemID, Username: b.Username,
		Password: &password, CACert: b.CACert, Insecure: b.Insecure}
}
