package hostcsv_test

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostcsv"
)

// The CLI's tests (cmd/eim/hostimport_test.go) check the format and the
// syntax line by line; these check what the UI relies on besides:
// references by ID and name, their errors, and the error file.
func TestResolveRefsAndErrors(t *testing.T) {
	f, err := hostcsv.Parse(strings.NewReader("Serial,UUID,OSProfile,Site,Secure\n" +
		"SN00001,,ubuntu,plant-1,false\n" +
		"SN00002,,os-00000002,site-00000009,\n" +
		"SN00003,,ubuntu-fde,twin,true\n" +
		"SN00004,,ubuntu,plant-1,true\n"))
	if err != nil {
		t.Fatal(err)
	}
	f.CheckSyntax(hostcsv.Defaults{})
	if n := f.Needs(); !n.OS || !n.Site || n.Account || n.Config {
		t.Errorf("needs: got %+v, want OS and Site", n)
	}
	oses := hostcsv.NewRefIndex(eim.KindOS)
	oses.Add("os-00000001", []string{"Ubuntu 24.04", "ubuntu"}, hostcsv.SecNone)
	oses.Add("os-00000002", []string{"Ubuntu FDE", "ubuntu-fde"}, hostcsv.SecSBFDE)
	sites := hostcsv.NewRefIndex(eim.KindSite)
	sites.Add("site-00000001", []string{"plant-1"}, "")
	sites.Add("site-00000002", []string{"twin"}, "")
	sites.Add("site-00000003", []string{"twin"}, "")
	f.ResolveRefs(hostcsv.Refs{OS: oses, Site: sites})

	want := []struct {
		osID, siteID string
		sec          eim.SecurityFeature
		errs         []string
	}{
		{"os-00000001", "site-00000001", hostcsv.SecNone, nil},
		{"os-00000002", "", hostcsv.SecNone, []string{`Site "site-00000009": no such site in the project`}},
		{"os-00000002", "", hostcsv.SecSBFDE, []string{`Site "twin": ambiguous, it names site-00000002 (twin), site-00000003 (twin); give the ID or the full name`}},
		{"os-00000001", "site-00000001", hostcsv.SecSBFDE, []string{"Secure: OS profile os-00000001 does not support secure boot and full disk encryption"}},
	}
	for i, w := range want {
		l := f.Lines[i]
		if l.OSID != w.osID || l.SiteID != w.siteID || l.SecFeature != w.sec || strings.Join(l.Errs, "|") != strings.Join(w.errs, "|") {
			t.Errorf("line %d: got OS %q site %q %s errors %q; want %q %q %s %q", l.N, l.OSID, l.SiteID, l.SecFeature, l.Errs, w.osID, w.siteID, w.sec, w.errs)
		}
	}

	var buf bytes.Buffer
	if err := hostcsv.WriteErrors(&buf, f, f.Lines[1:3], func(l *hostcsv.Line) string { return strings.Join(l.Errs, "; ") }); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0][5] != hostcsv.ErrorColumn || recs[1][0] != "SN00002" || !strings.Contains(recs[1][5], "no such site") {
		t.Errorf("error file: %q", recs)
	}
	// The error file parses as an import file (its error column ignored).
	again, err := hostcsv.Parse(bytes.NewReader(out))
	if err != nil || len(again.Lines) != 2 || again.Lines[0].Serial != "SN00002" {
		t.Errorf("the error file read again: %v, %+v", err, again)
	}
}
