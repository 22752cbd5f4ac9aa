// Command gen writes EIM's OpenAPI document. It is run by `go generate ./api`
// (see api/api.go):
//
//	go run ./internal/gen -o openapi.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eimhq/eim/api/internal/spec"
)

func main() {
	out := flag.String("o", "openapi.yaml", "file to write")
	flag.Parse()
	doc, err := spec.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
