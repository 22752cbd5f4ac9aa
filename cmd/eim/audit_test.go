package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseSpan(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90d", 90 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"720h", 720 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0d", 0, true},
		{"d", 0, false},
		{"-1d", 0, false},
		{"1x", 0, false},
		{"1d-1h", 0, false},
		{"", 0, true},
	} {
		got, err := parseSpan(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseSpan(%q): got %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	if got, err := parseSince("2h", now); err != nil || !got.Equal(now.Add(-2*time.Hour)) {
		t.Errorf("parseSince(2h): got %v, %v", got, err)
	}
	if got, err := parseSince("2026-11-25T00:00:00Z", now); err != nil || !got.Equal(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("parseSince(RFC 3339): got %v, %v", got, err)
	}
}

func TestServerAuditRetentionFlag(t *testing.T) {
	for _, bad := range []string{"--audit-retention=5m", "--audit-retention=soon", "--webhook-timeout=1ms"} {
		err := Main(t.Context(), []string{"server", bad, "--data-dir", t.TempDir()}, io.Discard, io.Discard)
		flag, _, _ := strings.Cut(strings.TrimPrefix(bad, "--"), "=")
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("eim server %s: got %v, want a usage error naming %s", bad, err, flag)
		}
	}
}
