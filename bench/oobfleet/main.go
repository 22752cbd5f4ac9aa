// Command oobfleet drives the oob module's fleet benchmark (bench/oobfleet.sh)
// against a running eim server and a running "eim-redfish-sim fleet":
//
//	oobfleet register --server URL --token-file F --csv bmcs.csv --ca ca.pem --ids ids.txt [--desired POWER_STATE_OFF]
//	    one region and site, a host per BMC of the CSV at that site, each
//	    with its BMC (Redfish, the fleet's certificate as its CA bundle)
//	oobfleet poweron --server URL --token-file F --ids ids.txt --fleet URL --limit 20 --window 10s --server-pid P
//	    desiredPowerState ON for every host; waits until every host is ON
//	    as its BMC reports it, then checks the BMCs' records: every
//	    machine on, no more than --limit power-ons received within any
//	    --window, each dropped power-on resent, none sent twice otherwise
//	oobfleet poll --fleet URL --n N --for 3m --server-pid P --sim-pid Q
//	    after every BMC has been read once more, the server's (and the
//	    BMCs') CPU over --for, per BMC read and per round of N reads
//
// It sends traffic only to the addresses it is given (use loopback).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: oobfleet register|poweron|poll [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "register":
		err = register(ctx, os.Args[2:])
	case "poweron":
		err = powerOn(ctx, os.Args[2:])
	case "poll":
		err = poll(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (register, poweron, poll)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oobfleet:", err)
		os.Exit(1)
	}
}

// api is the server's v1 API of the default project.
type api struct {
	base, token string
	hc          *http.Client
}

func newAPI(server, tokenFile string) (*api, error) {
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, err
	}
	return &api{base: strings.TrimSuffix(server, "/") + "/v1/projects/default", token: strings.TrimSpace(string(tok)),
		hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}, nil
}

func (a *api) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// each runs fn(0..n-1) on clients goroutines; the first error stops it.
func each(ctx context.Context, n, clients int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
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
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

type idOnly struct {
	ResourceID string `json:"resourceId"`
}

func register(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("register", flag.ExitOnError)
	server := fs.String("server", "http://127.0.0.1:18080", "the eim server")
	tokenFile := fs.String("token-file", "", "the admin token's file")
	csvFile := fs.String("csv", "", "the fleet's CSV (eim-redfish-sim fleet -csv-out)")
	caFile := fs.String("ca", "", "the fleet's certificate (eim-redfish-sim fleet -cert-out)")
	idsFile := fs.String("ids", "", "write the hosts' IDs, in the CSV's order, to this file")
	clients := fs.Int("clients", 16, "concurrent requests")
	desired := fs.String("desired", "POWER_STATE_ON", "the hosts' desiredPowerState at registration (their BMCs get a job for it at once)")
	_ = fs.Parse(args)
	a, err := newAPI(*server, *tokenFile)
	if err != nil {
		return err
	}
	f, err := os.Open(*csvFile)
	if err != nil {
		return err
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *csvFile, err)
	}
	if len(rows) < 2 || strings.Join(rows[0], ",") != strings.Join(redfishsim.FleetCSVHeader, ",") {
		return fmt.Errorf("%s: not a fleet's CSV", *csvFile)
	}
	rows = rows[1:]
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	var region, site idOnly
	if err := a.do(ctx, "POST", "/regions", map[string]any{"name": "oobfleet-region"}, &region); err != nil {
		return err
	}
	if err := a.do(ctx, "POST", "/sites", map[string]any{"name": "oobfleet-site", "regionId": region.ResourceID}, &site); err != nil {
		return err
	}
	ids := make([]string, len(rows))
	start := time.Now()
	err = each(ctx, len(rows), *clients, func(ctx context.Context, i int) error {
		r := rows[i]
		var h idOnly
		if err := a.do(ctx, "POST", "/compute/hosts", map[string]any{"name": "oobfleet-" + r[0],
			"uuid": fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", i), "siteId": site.ResourceID, "desiredPowerState": *desired}, &h); err != nil {
			return err
		}
		ids[i] = h.ResourceID
		return a.do(ctx, "PUT", "/compute/hosts/"+h.ResourceID+"/bmc", map[string]any{"protocol": "REDFISH", "address": r[1],
			"username": r[2], "password": r[3], "caCert": string(ca)}, nil)
	})
	if err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Printf("registered %d hosts with their BMCs in %.1f s (%.0f hosts/s, a create and a BMC PUT each, %d clients)\n",
		len(rows), d.Seconds(), float64(len(rows))/d.Seconds(), *clients)
	return os.WriteFile(*idsFile, []byte(strings.Join(ids, "\n")+"\n"), 0o644)
}

func readIDs(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			ids = append(ids, s)
		}
	}
	return ids, sc.Err()
}

func fleetReport(ctx context.Context, fleet string, window time.Duration) (redfishsim.FleetReport, error) {
	var r redfishsim.FleetReport
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(fleet, "/")+"/report?window="+window.String(), nil)
	if err != nil {
		return r, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return r, fmt.Errorf("fleet report: %s: %s", resp.Status, b)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// cpu is a process's CPU time (user and system) so far.
func cpu(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+s) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func powerOn(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("poweron", flag.ExitOnError)
	server := fs.String("server", "http://127.0.0.1:18080", "the eim server")
	tokenFile := fs.String("token-file", "", "the admin token's file")
	idsFile := fs.String("ids", "", "the hosts' IDs (register --ids)")
	fleet := fs.String("fleet", "", "the fleet's records (eim-redfish-sim fleet's http://…/)")
	limit := fs.Int("limit", 20, "the server's --oob-site-limit")
	window := fs.Duration("window", 10*time.Second, "the server's --oob-site-window")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this")
	serverPID := fs.Int("server-pid", 0, "the server's process, for its CPU time")
	clients := fs.Int("clients", 16, "concurrent requests")
	_ = fs.Parse(args)
	a, err := newAPI(*server, *tokenFile)
	if err != nil {
		return err
	}
	ids, err := readIDs(*idsFile)
	if err != nil {
		return err
	}
	if r, err := fleetReport(ctx, *fleet, *window); err != nil {
		return err
	} else if r.PowerOns != 0 {
		return fmt.Errorf("the BMCs received %d power-ons before the PATCHes (register the hosts as desired OFF)", r.PowerOns)
	}
	cpu0, err := cpu(*serverPID)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := each(ctx, len(ids), *clients, func(ctx context.Context, i int) error {
		return a.do(ctx, "PATCH", "/compute/hosts/"+ids[i], map[string]any{"desiredPowerState": "POWER_STATE_ON"}, nil)
	}); err != nil {
		return err
	}
	asked := time.Since(start)
	deadline := start.Add(*timeout)
	var on int
	for {
		var page struct {
			Total int `json:"totalElements"`
		}
		if err := a.do(ctx, "GET", "/compute/hosts?pageSize=1&filter=currentPowerState%3DPOWER_STATE_ON", nil, &page); err != nil {
			return err
		}
		if page.Total != on {
			on = page.Total
			fmt.Printf("  %5.0f s: %d of %d hosts ON\n", time.Since(start).Seconds(), on, len(ids))
		}
		if on >= len(ids) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d hosts ON after %s", on, len(ids), *timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	wall := time.Since(start)
	cpu1, err := cpu(*serverPID)
	if err != nil {
		return err
	}
	// Every job SUCCEEDED, one each.
	failed := 0
	if err := each(ctx, len(ids), *clients, func(ctx context.Context, i int) error {
		var list struct {
			Jobs []struct {
				State string `json:"state"`
			} `json:"jobs"`
		}
		if err := a.do(ctx, "GET", "/compute/hosts/"+ids[i]+"/bmc/jobs", nil, &list); err != nil {
			return err
		}
		if len(list.Jobs) == 0 || list.Jobs[0].State != "SUCCEEDED" {
			return fmt.Errorf("host %s: jobs %v, want the latest SUCCEEDED", ids[i], list.Jobs)
		}
		return nil
	}); err != nil {
		failed++
		fmt.Println("FAIL:", err)
	}
	r, err := fleetReport(ctx, *fleet, *window)
	if err != nil {
		return err
	}
	span := r.Last.Sub(r.First)
	fmt.Printf("power-on of %d hosts at one site, limit %d per %s: all ON %.1f s after the first PATCH (PATCHes took %.1f s); "+
		"power-ons received by the BMCs over %.1f s (%d, %d dropped and %d resent, %d sent twice otherwise); at most %d within any %s; "+
		"server CPU %.1f s (%.2f ms per host); load average at the end %s\n",
		len(ids), *limit, *window, wall.Seconds(), asked.Seconds(), span.Seconds(), r.PowerOns, r.Dropped, r.Resent, r.Extra,
		r.MaxPerWindow, *window, (cpu1 - cpu0).Seconds(), float64((cpu1-cpu0).Microseconds())/1000/float64(len(ids)), loadavg())
	var bad []string
	if r.On != len(ids) {
		bad = append(bad, fmt.Sprintf("%d of %d machines on", r.On, len(ids)))
	}
	if r.MaxPerWindow > *limit {
		bad = append(bad, fmt.Sprintf("%d power-ons within %s from %s, over the limit of %d", r.MaxPerWindow, *window, r.WindowStart.Format(time.TimeOnly+".000"), *limit))
	}
	if r.NotResent != 0 || r.Resent != r.Dropped {
		bad = append(bad, fmt.Sprintf("%d dropped power-ons not resent", r.NotResent))
	}
	if r.Extra != 0 {
		bad = append(bad, fmt.Sprintf("%d power-ons sent beyond need", r.Extra))
	}
	if failed > 0 {
		bad = append(bad, "a job did not succeed")
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	fmt.Println("checks: every host ON, the limit held in the BMCs' records, every dropped power-on resent: ok")
	return nil
}

func poll(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("poll", flag.ExitOnError)
	fleet := fs.String("fleet", "", "the fleet's records (eim-redfish-sim fleet's http://…/)")
	n := fs.Int("n", 0, "the fleet's BMCs")
	dur := fs.Duration("for", 3*time.Minute, "how long to measure")
	serverPID := fs.Int("server-pid", 0, "the server's process")
	simPID := fs.Int("sim-pid", 0, "the fleet's process")
	_ = fs.Parse(args)
	r0, err := fleetReport(ctx, *fleet, time.Second)
	if err != nil {
		return err
	}
	// Every BMC read once more: the rounds of the registration are over.
	for {
		r, err := fleetReport(ctx, *fleet, time.Second)
		if err != nil {
			return err
		}
		if r.Sessions >= r0.Sessions+*n {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	r1, err := fleetReport(ctx, *fleet, time.Second)
	if err != nil {
		return err
	}
	s1, err1 := cpu(*serverPID)
	b1, err2 := cpu(*simPID)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*dur):
	}
	r2, err := fleetReport(ctx, *fleet, time.Second)
	if err != nil {
		return err
	}
	s2, err1 := cpu(*serverPID)
	b2, err2 := cpu(*simPID)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	el := time.Since(start)
	reads := r2.Sessions - r1.Sessions
	if reads <= 0 {
		return fmt.Errorf("no BMC read in %s", el)
	}
	srv, sim := s2-s1, b2-b1
	perRead := float64(srv.Microseconds()) / 1000 / float64(reads)
	fmt.Printf("poll of %d BMCs: %d reads (sessions opened) in %.0f s = %.1f reads/s, %.2f rounds; "+
		"server CPU %.1f s = %.2f ms per BMC read, %.1f s per round of %d; the BMCs' process %.1f s (%.2f ms per read); load average at the end %s\n",
		*n, reads, el.Seconds(), float64(reads)/el.Seconds(), float64(reads)/float64(*n),
		srv.Seconds(), perRead, perRead*float64(*n)/1000, *n, sim.Seconds(), float64(sim.Microseconds())/1000/float64(reads), loadavg())
	if r2.On != *n {
		return fmt.Errorf("%d of %d machines on: the poll should not have changed them", r2.On, *n)
	}
	return nil
}
