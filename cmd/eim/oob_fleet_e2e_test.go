package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
)

// TestOOBFleetPowerOn: a site of 100 hosts, each with its own Redfish BMC
// (redfishsim's fleet, each on its own HTTPS port, 10 % dropping the
// first power-on), switched on at once through the v1 PATCH under a site
// limit of 10 power-ons per 2 s. Every host ends ON as its BMC reports
// it; the BMCs' own records show never more than 10 power-ons received
// within any 2 s, and each dropped power-on sent again (and no host's
// sent twice otherwise).
func TestOOBFleetPowerOn(t *testing.T) {
	if testing.Short() {
		t.Skip("powers on 100 simulated hosts through their BMCs at 10 per 2 s")
	}
	const (
		hosts     = 100
		limit     = 10
		window    = 2 * time.Second
		dropShare = 0.1
	)
	fleet, err := redfishsim.StartFleet(redfishsim.FleetConfig{N: hosts, DropShare: dropShare, Delay: 500 * time.Millisecond,
		Username: "fleet", Password: "fleet-bmc-Passw0rd"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)

	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--profile", "oob", "--log-level", "warn",
		"--oob-site-limit", fmt.Sprint(limit), "--oob-site-window", window.String(), "--oob-workers", "32",
		"--oob-confirm-timeout", "4s", "--oob-job-timeout", "5m")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	api := s.http + "/v1/projects/default"
	code, region := getJSON(t, "POST", api+"/regions", tok, `{"name":"fleet-region"}`)
	if code != 200 {
		t.Fatalf("POST a region: %d %v", code, region)
	}
	code, site := getJSON(t, "POST", api+"/sites", tok, fmt.Sprintf(`{"name":"fleet-site","regionId":%q}`, region["resourceId"]))
	if code != 200 {
		t.Fatalf("POST a site: %d %v", code, site)
	}
	ca := strings.ReplaceAll(string(fleet.CertPEM), "\n", `\n`)
	ids := make([]string, hosts)
	parallel(t, hosts, 8, func(i int) error {
		// Registered as desired OFF (a host is desired ON unless told
		// otherwise, and its BMC would get a job for that at once): the
		// site is switched on by the PATCH below.
		code, h := getJSON(t, "POST", api+"/compute/hosts", tok, fmt.Sprintf(`{"name":"fleet-%03d","uuid":"4c4c4544-0000-4000-8000-%012d","siteId":%q,"desiredPowerState":"POWER_STATE_OFF"}`,
			i, i, site["resourceId"]))
		if code != 200 {
			return fmt.Errorf("POST host %d: %d %v", i, code, h)
		}
		ids[i] = h["resourceId"].(string)
		b := fleet.BMCs[i]
		if code, body := getJSON(t, "PUT", api+"/compute/hosts/"+ids[i]+"/bmc", tok, fmt.Sprintf(
			`{"protocol":"REDFISH","address":%q,"username":%q,"password":%q,"caCert":"%s"}`, b.URL, fleet.Username, fleet.Password, ca)); code != 200 {
			return fmt.Errorf("PUT host %d's BMC: %d %v", i, code, body)
		}
		return nil
	})

	for _, b := range fleet.BMCs {
		if n := len(b.BMC.Actions()); n != 0 {
			t.Fatalf("BMC %d received %d actions at registration, want none", b.Index, n)
		}
	}
	start := time.Now()
	parallel(t, hosts, 8, func(i int) error {
		if code, body := getJSON(t, "PATCH", api+"/compute/hosts/"+ids[i], tok, `{"desiredPowerState":"POWER_STATE_ON"}`); code != 200 {
			return fmt.Errorf("PATCH host %d: %d %v", i, code, body)
		}
		return nil
	})
	// Every job SUCCEEDED, its host ON as the BMC reports it.
	sends := make([]int, hosts)
	deadline := time.Now().Add(4 * time.Minute)
	for i, id := range ids {
		for {
			code, body := getJSON(t, "GET", api+"/compute/hosts/"+id+"/bmc/jobs", tok, "")
			list, _ := body["jobs"].([]any)
			if code != 200 {
				t.Fatalf("host %d's jobs: %d %v", i, code, body)
			}
			// The registration's OFF job (nothing sent: the machine is
			// off) unless the module saw the host first with the PATCH's
			// ON, then the ON job.
			if len(list) >= 1 && list[0].(map[string]any)["desiredPowerState"] == "POWER_STATE_ON" {
				job := list[0].(map[string]any)
				state := job["state"]
				if state == "SUCCEEDED" {
					steps := job["steps"].([]any)
					n, _ := steps[len(steps)-1].(map[string]any)["sends"].(float64)
					sends[i] = int(n)
					break
				}
				if state == "FAILED" || state == "CANCELLED" {
					t.Fatalf("host %d's job: %v\nserver:\n%s", i, job, s.errOut.String())
				}
			}
			if len(list) > 2 || (len(list) == 2 && list[1].(map[string]any)["desiredPowerState"] != "POWER_STATE_OFF") {
				t.Fatalf("host %d has %d jobs, want at most OFF at registration and ON: %v", i, len(list), list)
			}
			if time.Now().After(deadline) {
				t.Fatalf("host %d's job did not succeed in time: %v\n%s", i, body, s.errOut.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
		if code, h := getJSON(t, "GET", api+"/compute/hosts/"+id, tok, ""); code != 200 || h["currentPowerState"] != "POWER_STATE_ON" || h["powerStatus"] != "Powered on" {
			t.Fatalf("host %d after its job: %d %v %v", i, code, h["currentPowerState"], h["powerStatus"])
		}
	}
	wall := time.Since(start)

	rep := fleet.Report(window)
	t.Logf("%d hosts on in %s: %d power-ons received from %s to %s, at most %d within %s (from %s); %d dropped, %d resent",
		rep.On, wall.Round(time.Millisecond), rep.PowerOns, rep.First.Format("15:04:05.000"), rep.Last.Format("15:04:05.000"),
		rep.MaxPerWindow, window, rep.WindowStart.Format("15:04:05.000"), rep.Dropped, rep.Resent)
	drops := hosts / 10 // round(hosts × dropShare)
	if rep.On != hosts || rep.Dropped != drops || rep.Resent != drops || rep.NotResent != 0 || rep.Extra != 0 || rep.PowerOns != hosts+drops {
		t.Errorf("the BMCs' records: %+v; want %d on, %d dropped and each resent, %d power-ons, none done twice", rep, hosts, drops, hosts+drops)
	}
	if rep.MaxPerWindow > limit {
		t.Errorf("%d power-ons received within %s from %s: the site limit is %d", rep.MaxPerWindow, window, rep.WindowStart.Format("15:04:05.000"), limit)
	}
	// The power-ons of hosts+drops at limit per window take at least
	// (hosts+drops)/limit - 1 windows: the limit held them back.
	if least := time.Duration((hosts+drops)/limit-1) * window; rep.Last.Sub(rep.First) < least {
		t.Errorf("power-ons spread over %s, want at least %s at %d per %s", rep.Last.Sub(rep.First), least, limit, window)
	}
	for i, b := range fleet.BMCs {
		want := 1
		if b.Drops {
			want = 2
		}
		if sends[i] != want {
			t.Errorf("host %d (BMC drops: %v): its job sent the power-on %d times, want %d", i, b.Drops, sends[i], want)
		}
	}
}

// parallel runs fn(0..n-1) on workers goroutines and fails the test with
// the first error.
func parallel(t *testing.T, n, workers int, fn func(i int) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}
