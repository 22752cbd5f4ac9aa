package redfishsim_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
)

// TestFleet: a fleet of BMCs on their own ports, trusted through the one
// certificate, a share of them dropping their first power-on; the report
// counts drops, resends, extra power-ons and the most in a window.
func TestFleet(t *testing.T) {
	f, err := redfishsim.StartFleet(redfishsim.FleetConfig{N: 10, DropShare: 0.2, Username: "root", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.CertPEM) {
		t.Fatal("the fleet's certificate is not PEM")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	var csvOut bytes.Buffer
	if err := f.WriteCSV(&csvOut); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil || len(rows) != 11 || strings.Join(rows[0], ",") != "index,address,username,password,drops" {
		t.Fatalf("the CSV: %v %v", rows, err)
	}
	ports, drops := map[string]bool{}, 0
	for _, r := range rows[1:] {
		ports[r[1]] = true
		if r[4] == "true" {
			drops++
		}
		if r[2] != "root" || r[3] != "pw" || !strings.HasPrefix(r[1], "https://127.0.0.1:") {
			t.Fatalf("row %v", r)
		}
	}
	if len(ports) != 10 || drops != 2 {
		t.Fatalf("%d distinct addresses, %d dropping; want 10 and 2", len(ports), drops)
	}
	on := func(b *redfishsim.FleetBMC) {
		t.Helper()
		req, _ := http.NewRequest("POST", b.URL+"/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType":"On"}`))
		req.SetBasicAuth("root", "pw")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 {
			t.Fatalf("BMC %d: reset On answered %d", b.Index, resp.StatusCode)
		}
	}
	// Every BMC once; the dropping ones but one twice; BMC 1 (not
	// dropping) twice: its second is "already", not a power-on done.
	for _, b := range f.BMCs {
		on(b)
	}
	resent := 0
	for _, b := range f.BMCs {
		if b.Drops && resent == 0 {
			on(b)
			resent++
		}
	}
	on(f.BMCs[1])
	r := f.Report(time.Hour)
	want := redfishsim.FleetReport{BMCs: 10, On: 9, PowerOns: 11, Dropped: 2, Resent: 1, NotResent: 1, Extra: 0, MaxPerWindow: 11}
	r.WindowStart, r.First, r.Last = time.Time{}, time.Time{}, time.Time{} // Sessions 0: Basic authentication
	if r != want {
		t.Fatalf("report %+v, want %+v", r, want)
	}
	if got := len(f.Actions()); got != 12 {
		t.Fatalf("%d actions, want 12", got)
	}
}

func TestMaxInWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, c := range []struct {
		times []time.Time
		want  int
	}{
		{nil, 0},
		{at(0), 1},
		{at(0, 999, 1000, 1999), 2}, // [t, t+1s): 1000 is not within 0's window
		{at(0, 1, 2, 900, 1600), 4},
		{at(0, 2000, 4000), 1},
	} {
		if got, _ := redfishsim.MaxInWindow(c.times, time.Second); got != c.want {
			t.Errorf("MaxInWindow(%v): %d, want %d", c.times, got, c.want)
		}
	}
}
