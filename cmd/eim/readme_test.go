package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeSection returns the sh code blocks and the text of the README
// section headed title.
func readmeSection(t *testing.T, title string) (blocks [][]string, text string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("README has no section %q", title)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(s, -1) {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(m[1]), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
	}
	return blocks, s
}

// TestReadmeFirstRun checks README's first commands: the two commands as
// they are, what the silent first build costs, and the faster path (the
// binary built once, then run).
func TestReadmeFirstRun(t *testing.T) {
	blocks, text := readmeSection(t, "The two commands")
	has := func(cmds ...string) bool {
		return slices.ContainsFunc(blocks, func(b []string) bool { return slices.Equal(b, cmds) })
	}
	for _, want := range [][]string{{"go run ./cmd/eim server"}, {"go test ./..."}, {"go build -o eim ./cmd/eim", "./eim server"}} {
		if !has(want...) {
			t.Errorf("README's two commands: no block %q; got %q", want, blocks)
		}
	}
	if !regexp.MustCompile(`first run compiles EIM[^.]*prints nothing[^.]*minutes`).MatchString(strings.Join(strings.Fields(text), " ")) {
		t.Error("README's two commands do not say that the first run compiles silently, nor for how long")
	}
}
