// Command prog is the program of the test image: it runs its arguments as
// steps, in order.
//
//	echo:TEXT          print TEXT
//	write:PATH=TEXT    write TEXT to PATH (creating its directory)
//	rm:PATH            remove PATH
//	copy:SRC=DST       wait until SRC exists, then copy it to DST
//	sleep:DURATION     wait
//	exit:N             exit with status N
//	forever            wait until killed
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	// As PID 1 of its container the program gets no default action for
	// SIGTERM: it would wait out podman's stop timeout and be killed.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		os.Exit(128 + int(syscall.SIGTERM))
	}()
	for _, arg := range os.Args[1:] {
		op, val, _ := strings.Cut(arg, ":")
		switch op {
		case "echo":
			fmt.Println(val)
		case "write":
			path, text, _ := strings.Cut(val, "=")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				fail(err)
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				fail(err)
			}
		case "copy":
			src, dst, _ := strings.Cut(val, "=")
			var b []byte
			for {
				var err error
				if b, err = os.ReadFile(src); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				fail(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				fail(err)
			}
		case "rm":
			if err := os.Remove(val); err != nil && !os.IsNotExist(err) {
				fail(err)
			}
		case "sleep":
			d, err := time.ParseDuration(val)
			if err != nil {
				fail(err)
			}
			time.Sleep(d)
		case "exit":
			n, err := strconv.Atoi(val)
			if err != nil {
				fail(err)
			}
			os.Exit(n)
		case "forever":
			for {
				time.Sleep(time.Hour)
			}
		default:
			fail(fmt.Errorf("unknown step %q", arg))
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(100)
}
