package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

// Every create flag of every noun sets a writable field of the noun's API
// type (for the telemetry nouns, of its logs or metrics variant), and
// every noun has a collection to talk to.
func TestNounFlagsAreWritable(t *testing.T) {
	for _, n := range nouns {
		col := n.collection()
		if col.Path == "" || col.Kind != n.kind || col.Plural == "" {
			t.Errorf("%s: collection %+v", n.name, col)
			continue
		}
		variant := ""
		for _, v := range eim.Variants(n.kind) {
			if v.Plural == col.Plural {
				variant = v.Value
			}
		}
		if eim.Variants(n.kind) != nil && variant == "" {
			t.Errorf("%s: collection %s is none of its kind's types", n.name, col.Path)
		}
		for _, f := range n.flags {
			fd, err := writableField(n.kind, f.field)
			if err != nil {
				t.Errorf("%s --%s: %v", n.name, f.flag, err)
				continue
			}
			if !fd.In(variant) {
				t.Errorf("%s --%s: field %s is not of the noun's type", n.name, f.flag, f.field)
			}
		}
	}
}

// Every noun is listed in "eim help".
func TestNounsInHelp(t *testing.T) {
	_, list, ok := strings.Cut(usageText, "Nouns:")
	if !ok {
		t.Fatal(`"eim help" has no Nouns: list`)
	}
	list, _, _ = strings.Cut(list, "\n\n")
	listed := strings.Fields(list)
	for _, n := range nouns {
		if !slices.Contains(listed, n.name) {
			t.Errorf("noun %s is not in the Nouns: list of \"eim help\" (%v)", n.name, listed)
		}
	}
}
