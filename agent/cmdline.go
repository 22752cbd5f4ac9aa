package agent

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// BootConfig is what the iPXE script passes to the micro-OS on the kernel
// command line: eim.url=, eim.ca=sha256:<hex> and optionally eim.enroll=.
type BootConfig struct {
	URL           string
	CAFingerprint string // lower-case hex SHA-256 of the CA certificate's DER
	EnrollToken   string
}

var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseCmdline reads the eim.* parameters of a kernel command line. eim.url
// (https) and eim.ca are required; other parameters are ignored.
func ParseCmdline(s string) (BootConfig, error) {
	var c BootConfig
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch k {
		case "eim.url":
			c.URL = v
		case "eim.ca":
			c.CAFingerprint = v
		case "eim.enroll":
			c.EnrollToken = v
		}
	}
	if c.URL == "" {
		return BootConfig{}, errors.New("kernel command line has no eim.url")
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return BootConfig{}, fmt.Errorf("eim.url %q is not an https URL", c.URL)
	}
	c.URL = strings.TrimSuffix(c.URL, "/")
	if c.CAFingerprint == "" {
		return BootConfig{}, errors.New("kernel command line has no eim.ca")
	}
	fp, err := ParseFingerprint(c.CAFingerprint)
	if err != nil {
		return BootConfig{}, err
	}
	c.CAFingerprint = fp
	return c, nil
}

// ParseFingerprint accepts "sha256:<hex>" or "<hex>" (64 hex digits, colons
// allowed) and returns the lower-case hex digits.
func ParseFingerprint(s string) (string, error) {
	fp := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "sha256:"))
	fp = strings.ReplaceAll(fp, ":", "")
	if !fingerprintRE.MatchString(fp) {
		return "", fmt.Errorf("CA fingerprint %q is not sha256:<64 hex digits>", s)
	}
	return fp, nil
}
