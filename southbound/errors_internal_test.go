package southbound

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// While the store is away, node calls' failures are logged once per
// storeWarnEvery with their count, not once per call.
func TestStoreWarnIsSpaced(t *testing.T) {
	var buf strings.Builder
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return now }}
	err := eim.Errorf(eim.EUNAVAILABLE, "the database is unavailable; try again")
	for range 1000 {
		s.storeWarn("node auth: read host", "host-12345678", err)
	}
	now = now.Add(storeWarnEvery)
	s.storeWarn("node auth: read host", "host-12345678", err)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d log lines for 1,001 failed calls over one interval, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "failed_calls=1") || !strings.Contains(lines[1], "failed_calls=1000") {
		t.Errorf("the lines' counts: got\n%s\nwant 1, then the 1,000 since", buf.String())
	}
}
