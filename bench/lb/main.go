// Command lb is a round-robin TCP load balancer for the benchmarks: each
// connection to --listen goes to the next of --to that accepts it (the
// plain layer-4 balancer a deployment of EIM replicas sits behind).
//
//	lb --listen 127.0.0.1:18443 --to 127.0.0.1:18453,127.0.0.1:18463
//
// It runs until interrupted.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eimhq/eim/internal/tcplb"
)

func main() {
	listen := flag.String("listen", "", "address to accept connections on")
	to := flag.String("to", "", "comma-separated backend addresses")
	flag.Parse()
	var backends []string
	for _, a := range strings.Split(*to, ",") {
		if a = strings.TrimSpace(a); a != "" {
			backends = append(backends, a)
		}
	}
	if *listen == "" || len(backends) == 0 {
		fmt.Fprintln(os.Stderr, "lb: --listen and --to are required")
		os.Exit(2)
	}
	p, err := tcplb.Listen(*listen, tcplb.Static(backends...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "lb:", err)
		os.Exit(1)
	}
	fmt.Printf("lb: %s → %s\n", p.Addr(), strings.Join(backends, ", "))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	p.Close()
}
