package eim

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Firmware of many boards ships SMBIOS identities that the vendor never
// filled in. Such a value is the same on thousands of machines, so it
// identifies none of them: onboarding ignores it when matching a device, and
// the inventory does not let it stand alone for a host.

// placeholderSerials are the serials OEMs leave in SMBIOS, folded as
// foldSerial folds them.
var placeholderSerials = map[string]bool{
	"tobefilledbyoem": true, "defaultstring": true, "default": true,
	"systemserialnumber": true, "chassisserialnumber": true,
	"baseboardserialnumber": true, "boardserialnumber": true, "serialnumber": true,
	"notspecified": true, "notapplicable": true, "none": true, "na": true,
	"null": true, "unknown": true, "oem": true, "oem00": true,
	"0123456789": true, "1234567890": true, "123456789": true,
}

// placeholderUUIDs are SMBIOS UUIDs that firmware ships on many boards,
// besides those of one repeated digit (all zeros, all Fs).
var placeholderUUIDs = map[string]bool{
	"03000200-0400-0500-0006-000700080009": true,
	"01234567-89ab-cdef-0123-456789abcdef": true,
}

// PlaceholderSerial reports whether the serial number s identifies no
// machine: empty, a text OEMs leave in SMBIOS ("To Be Filled By O.E.M.",
// "Default string", "System Serial Number", "0123456789" …), or one
// character repeated ("00000000", "XXXXX"). Case, spaces, dots, dashes,
// underscores and slashes do not matter.
func PlaceholderSerial(s string) bool {
	f := foldSerial(s)
	return f == "" || placeholderSerials[f] || repeated(f)
}

// PlaceholderUUID reports whether the UUID u identifies no machine: empty,
// one hex digit repeated (all zeros, all Fs) or a well-known firmware
// default. Case and surrounding spaces do not matter.
func PlaceholderUUID(u string) bool {
	u = strings.ToLower(strings.TrimSpace(u))
	return u == "" || placeholderUUIDs[u] || repeated(strings.ReplaceAll(u, "-", ""))
}

func foldSerial(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r), r == '.', r == '-', r == '_', r == '/':
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// repeated reports whether s is one character repeated (false for "").
func repeated(s string) bool {
	if s == "" {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s)
	return strings.Trim(s, string(r)) == ""
}
