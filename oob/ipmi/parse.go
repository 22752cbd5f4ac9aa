package ipmi

import (
	"errors"
	"strings"
)

// parsePowerStatus reads "Chassis Power is on" (or off).
func parsePowerStatus(out string) (PowerState, bool) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Chassis Power is ")
		if !ok {
			continue
		}
		switch strings.TrimSpace(rest) {
		case "on":
			return On, true
		case "off":
			return Off, true
		}
	}
	return Off, false
}

// bootSelectors maps ipmitool's "Boot Device Selector" texts to devices.
var bootSelectors = map[string]BootDevice{
	"No override":                        BootNone,
	"Force PXE":                          BootPXE,
	"Force Boot from default Hard-Drive": BootDisk,
	"Force Boot from default Hard-Drive, request Safe-Mode": BootDisk,
	"Force Boot from CD/DVD":                                BootCDROM,
	"Force Boot into BIOS Setup":                            BootBIOS,
}

// parseBootFlags reads the boot flags (parameter 5) that "chassis bootparam
// get 5" prints.
func parseBootFlags(out string) (Boot, error) {
	var b Boot
	var sawOnce, sawDevice bool
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- "))
		switch {
		case line == "Boot Flag Valid":
			b.Valid = true
		case line == "Options apply to only next boot":
			b.Once, sawOnce = true, true
		case line == "Options apply to all future boots":
			b.Once, sawOnce = false, true
		case line == "BIOS EFI boot":
			b.UEFI = true
		default:
			sel, ok := strings.CutPrefix(line, "Boot Device Selector")
			if !ok {
				continue
			}
			sel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sel), ":"))
			dev, known := bootSelectors[sel]
			if !known {
				dev = BootDevice("other: " + sel)
			}
			b.Device, sawDevice = dev, true
		}
	}
	if !sawOnce || !sawDevice {
		return Boot{}, errors.New("no boot flags in the answer")
	}
	return b, nil
}

// classify reads ipmitool's error output (with -v): the kind of failure and
// the line to show.
func classify(stderr string) (Kind, string) {
	lines := errorLines(stderr)
	has := func(s string) bool {
		for _, l := range lines {
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}
	detail := ""
	if len(lines) > 0 {
		detail = lines[len(lines)-1]
	}
	switch {
	// RAKP 2's HMAC is made with the password: wrong password. RAKP 2
	// with an error status: unknown user, or a user not allowed.
	case has("RAKP 2 HMAC is invalid"), has("RAKP 2 message indicates an error"),
		has("RAKP 4 message has invalid integrity check"), has("unauthorized name"),
		has("invalid password"):
		for _, l := range lines {
			if strings.Contains(l, "RAKP") {
				return BadCredentials, l
			}
		}
		return BadCredentials, detail
	// The first message of a session got no answer.
	case has("Get Auth Capabilities error"), has("No response from remote controller"),
		has("Error issuing Get Channel Authentication Capabilities"),
		has("Unable to establish IPMI v2 / RMCP+ session"):
		return Unreachable, detail
	// Completion codes C1 (invalid command), CC (invalid data field), 80
	// (parameter not supported), C9 (parameter out of range).
	case has("Invalid command"), has("Invalid data field in request"),
		has("Parameter not supported"), has("Parameter out of range"):
		return Unsupported, detail
	}
	return Failed, detail
}

// errorLines drops -v's chatter, keeping the lines that say what failed.
func errorLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), ">"))
		switch {
		case l == "",
			strings.HasPrefix(l, "Loading IANA PEN Registry"),
			strings.HasPrefix(l, "Discovered IPMB address"),
			strings.HasPrefix(l, "Get HPM.x Capabilities"),
			strings.HasPrefix(l, "Invalid completion code received"):
			continue
		}
		out = append(out, l)
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
