package hostcsv_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eimhq/eim/hostcsv"
)

// secrets is a SecretReader over fixed references.
func secrets(m map[string]string) hostcsv.SecretReader {
	return func(ref string) (string, error) {
		v, ok := m[ref]
		if !ok {
			return "", fmt.Errorf("%s: not set", ref)
		}
		return v, nil
	}
}

// TestBMCColumns: a line's BMC columns make its BMC, the password read
// from where the cell says (never written in the file); a bad cell is
// refused naming its column, and no BMC is made of that line.
func TestBMCColumns(t *testing.T) {
	const hdr = "Serial,UUID,BMCProtocol,BMCAddress,BMCUsername,BMCPassword,BMCSystemID,BMCInsecure,BMCCACert"
	f, err := hostcsv.Parse(strings.NewReader(strings.Join([]string{hdr,
		"SN00001,,IPMI,10.0.0.5:623,admin,env:BMC_PW,,,",            // 2: fine
		"SN00002,,redfish,https://10.0.0.6,root,file:/run/pw,1,,",   // 3: fine, lower-case protocol
		"SN00003,,IPMI,10.0.0.7,admin,hunter2,,,",                   // 4: a literal password
		"SN00004,,SNMP,10.0.0.8,admin,env:BMC_PW,,,",                // 5: unknown protocol
		"SN00005,,IPMI,,admin,env:BMC_PW,,,",                        // 6: no address
		"SN00006,,REDFISH,https://10.0.0.9/x,admin,env:BMC_PW,,,",   // 7: a path in the URL
		"SN00007,,IPMI,10.0.0.10,admin,env:NOPE,,,",                 // 8: unset variable
		"SN00008,,REDFISH,10.0.0.11,admin,env:BMC_PW,,maybe,",       // 9: BMCInsecure
		"SN00009,,REDFISH,10.0.0.12,admin,env:BMC_PW,,,/etc/ca.pem", // 10: CA not a reference
		"SN00010,,IPMI,10.0.0.13,admin,env:LONG_PW,,,",              // 11: too long for IPMI
		"SN00011,,IPMI,10.0.0.14,admin,env:BMC_PW,1,,",              // 12: systemId for IPMI
		"SN00012,,,,,,,,", // 13: no BMC
		"SN00013,,REDFISH,10.0.0.15,admin,env:BMC_PW,,true,file:/ca.pem", // 14: both CA and insecure
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	f.CheckSyntax(hostcsv.Defaults{Secrets: secrets(map[string]string{
		"env:BMC_PW": "s3cret-pw", "file:/run/pw": "from-a-file\n", "env:LONG_PW": strings.Repeat("x", 21),
		"file:/ca.pem": "-----BEGIN CERTIFICATE-----\n",
	})})
	want := map[int]string{
		4:  "BMCPassword: a password is not written in the file; give env:NAME or file:PATH",
		5:  `BMCProtocol: "SNMP" is not one of REDFISH, IPMI, AMT`,
		6:  "BMCAddress: required",
		7:  "BMCAddress: ",
		8:  "BMCPassword: env:NOPE: not set",
		9:  `BMCInsecure: "maybe": want true or false`,
		10: "BMCCACert: want file:PATH",
		11: "BMCPassword: IPMI passwords are at most 20 bytes",
		12: "BMCSystemID: only a Redfish BMC has systems",
		14: "BMCInsecure: not with caCert",
	}
	for _, l := range f.Lines {
		got := strings.Join(l.Errs, "; ")
		if strings.Contains(got, "hunter2") || strings.Contains(got, "s3cret") {
			t.Errorf("line %d: the error repeats a password: %s", l.N, got)
		}
		w, bad := want[l.N]
		switch {
		case bad && !strings.Contains(got, w):
			t.Errorf("line %d: got %q, want an error containing %q", l.N, got, w)
		case bad && l.BMC != nil:
			t.Errorf("line %d: refused, yet its BMC is %+v", l.N, l.BMC)
		case !bad && got != "":
			t.Errorf("line %d: got %q, want no error", l.N, got)
		}
	}
	if b := f.Lines[0].BMC; b == nil || b.Protocol != "IPMI" || b.Address != "10.0.0.5:623" || b.Username != "admin" || b.Password == nil || *b.Password != "s3cret-pw" {
		t.Errorf("line 2's BMC: got %+v, want IPMI 10.0.0.5:623 admin with the variable's password", b)
	}
	if b := f.Lines[1].BMC; b == nil || b.Protocol != "REDFISH" || b.SystemID != "1" || *b.Password != "from-a-file" {
		t.Errorf("line 3's BMC: got %+v, want REDFISH system 1, the file's password without its line break", b)
	}
	if f.Lines[11].BMC != nil {
		t.Errorf("line 13 has no BMC columns, yet got %+v", f.Lines[11].BMC)
	}

	// Without a reader (the web UI), a line with a BMC is refused.
	ui, _ := hostcsv.Parse(strings.NewReader(hdr + "\nSN00001,,IPMI,10.0.0.5:623,admin,env:BMC_PW,,,\n"))
	ui.CheckSyntax(hostcsv.Defaults{})
	if got := strings.Join(ui.Lines[0].Errs, "; "); !strings.Contains(got, "read by `eim host import` only") || ui.Lines[0].BMC != nil {
		t.Errorf("without a reader: got %q, want the line refused", got)
	}
	// The template has the columns.
	for _, c := range hostcsv.BMCColumns {
		if !strings.Contains(hostcsv.Template, ","+c+",") {
			t.Errorf("template %q: no column %s", hostcsv.Template, c)
		}
	}
}
