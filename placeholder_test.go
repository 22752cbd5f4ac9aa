package eim_test

import (
	"testing"

	"github.com/eimhq/eim"
)

func TestPlaceholderSerial(t *testing.T) {
	cases := []struct {
		serial string
		want   bool
	}{
		{"", true},
		{"   ", true},
		{"To Be Filled By O.E.M.", true},
		{"To be filled by O.E.M.", true},
		{"TOBEFILLEDBYOEM", true},
		{"Default string", true},
		{"DefaultString", true},
		{"System Serial Number", true},
		{"Chassis Serial Number", true},
		{"Not Specified", true},
		{"Not Applicable", true},
		{"N/A", true},
		{"None", true},
		{"0123456789", true},
		{"1234567890", true},
		{"123456789", true},
		{"OEM00", true},
		{"00000000", true},
		{"XXXXX", true},
		{"xxxxxxxxxx", true},
		{"0", true},
		{"SN12345", false},
		{"ABC12345", false},
		{"5CD1234XYZ", false},
		{"0123456788", false},
		{"00000001", false},
		{"Default string2", false},
	}
	for _, c := range cases {
		t.Run(c.serial, func(t *testing.T) {
			if got := eim.PlaceholderSerial(c.serial); got != c.want {
				t.Errorf("PlaceholderSerial(%q): got %v, want %v", c.serial, got, c.want)
			}
		})
	}
}

func TestPlaceholderUUID(t *testing.T) {
	cases := []struct {
		uuid string
		want bool
	}{
		{"", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", true},
		{" ffffffff-ffff-ffff-ffff-ffffffffffff ", true},
		{"03000200-0400-0500-0006-000700080009", true},
		{"01234567-89AB-CDEF-0123-456789ABCDEF", true},
		{"4c4c4544-0035-4310-8046-b4c04f4a4c32", false},
		{"00000000-0000-0000-0000-000000000001", false},
	}
	for _, c := range cases {
		t.Run(c.uuid, func(t *testing.T) {
			if got := eim.PlaceholderUUID(c.uuid); got != c.want {
				t.Errorf("PlaceholderUUID(%q): got %v, want %v", c.uuid, got, c.want)
			}
		})
	}
}
