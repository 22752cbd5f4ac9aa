package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
)

// runFleet serves a fleet of BMCs (redfishsim.StartFleet) until ctx ends:
// it writes their addresses and account as CSV and their certificate,
// and serves on -control what the BMCs recorded:
//
//	GET /actions            every reset request received, by time (JSON)
//	GET /report?window=10s  the fleet's report for a power-on (JSON)
func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eim-redfish-sim fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		n         = fs.Int("n", 100, "number of BMCs, one system each, each on its own HTTPS port")
		addr      = fs.String("addr", "127.0.0.1", "the address the BMCs listen on")
		user      = fs.String("user", "admin", "every BMC's account name")
		password  = fs.String("password", "redfish", "every BMC's account password")
		dropShare = fs.Float64("drop-share", 0, "share (0 to 1) of the BMCs that drop the first power-on they receive")
		delay     = fs.Duration("delay", 0, "how long PoweringOn and PoweringOff last")
		on        = fs.Bool("on", false, "the machines start powered on")
		csvOut    = fs.String("csv-out", "", "write the BMCs (index,address,username,password,drops) as CSV to this file (default: standard output)")
		certOut   = fs.String("cert-out", "", "write the BMCs' certificate (PEM), to trust it as a CA bundle")
		control   = fs.String("control", "127.0.0.1:0", "plain HTTP address of the records (/actions, /report)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("fleet: unexpected arguments %q", fs.Args())
	}
	if *n < 1 {
		return errors.New("fleet: -n must be at least 1")
	}
	if *dropShare < 0 || *dropShare > 1 {
		return fmt.Errorf("fleet: -drop-share must be between 0 and 1, got %v", *dropShare)
	}
	if *delay < 0 {
		return fmt.Errorf("fleet: -delay must not be negative, got %s", *delay)
	}
	f, err := redfishsim.StartFleet(redfishsim.FleetConfig{N: *n, Addr: *addr, Username: *user, Password: *password,
		DropShare: *dropShare, Delay: *delay, On: *on})
	if err != nil {
		return err
	}
	defer f.Close()
	if *certOut != "" {
		if err := os.WriteFile(*certOut, f.CertPEM, 0o644); err != nil {
			return err
		}
	}
	if *csvOut != "" {
		out, err := os.Create(*csvOut)
		if err != nil {
			return err
		}
		if err := f.WriteCSV(out); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	} else if err := f.WriteCSV(stdout); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *control)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /actions", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, f.Actions()) })
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, r *http.Request) {
		window := 10 * time.Second
		if v := r.URL.Query().Get("window"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				http.Error(w, "window: not a positive duration: "+v, http.StatusBadRequest)
				return
			}
			window = d
		}
		writeJSON(w, f.Report(window))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(stderr, "fleet: %d BMCs (%s to %s), records at http://%s/\n", *n, f.BMCs[0].URL, f.BMCs[len(f.BMCs)-1].URL, ln.Addr())
	<-ctx.Done()
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
