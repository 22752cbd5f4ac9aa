package window

import (
	"testing"
	"time"
)

func unix(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

func TestSingle(t *testing.T) {
	w := Single{Start: 100, End: 200}
	for _, c := range []struct {
		t      int64
		open   bool
		closes int64
	}{{99, false, 0}, {100, true, 200}, {199, true, 200}, {200, false, 0}} {
		if open, closes := w.OpenAt(c.t); open != c.open || closes != c.closes {
			t.Errorf("OpenAt(%d) = %v, %d; want %v, %d", c.t, open, closes, c.open, c.closes)
		}
	}
	if open, closes := (Single{Start: 100}).OpenAt(1 << 40); !open || closes != 0 {
		t.Errorf("open-ended: %v, %d", open, closes)
	}
}

func TestRepeatedOpenAt(t *testing.T) {
	// Every day at 02:30 for an hour.
	w := Repeated{Duration: 3600, Minutes: "30", Hours: "2", DayOfMonth: "*", Month: "*", DayOfWeek: "*"}
	for _, c := range []struct {
		at     string
		open   bool
		closes string
	}{
		{"2026-11-23T02:29:59Z", false, ""},
		{"2026-11-23T02:30:00Z", true, "2026-11-23T03:30:00Z"},
		{"2026-11-23T03:29:59Z", true, "2026-11-23T03:30:00Z"},
		{"2026-11-23T03:30:00Z", false, ""},
	} {
		open, closes := w.OpenAt(unix(c.at))
		if open != c.open || (c.open && closes != unix(c.closes)) {
			t.Errorf("OpenAt(%s) = %v, %s", c.at, open, time.Unix(closes, 0).UTC())
		}
	}

	// Overlapping windows: every minute for 5 minutes closes 5 minutes
	// after the latest opening.
	w = Repeated{Duration: 300, Minutes: "*", Hours: "*", DayOfMonth: "*", Month: "*", DayOfWeek: "*"}
	at := unix("2026-11-23T10:00:30Z")
	if open, closes := w.OpenAt(at); !open || closes != unix("2026-11-23T10:05:00Z") {
		t.Errorf("every minute: %v, %s", open, time.Unix(closes, 0).UTC())
	}

	// Day of month OR day of week when both are restricted: the 1st, or
	// Mondays (2026-11-23 is a Monday).
	w = Repeated{Duration: 60, Minutes: "0", Hours: "0", DayOfMonth: "1", Month: "*", DayOfWeek: "1"}
	for at, want := range map[string]bool{"2026-11-23T00:00:10Z": true, "2026-12-01T00:00:10Z": true, "2026-11-24T00:00:10Z": false} {
		if open, _ := w.OpenAt(unix(at)); open != want {
			t.Errorf("dom|dow at %s: %v", at, open)
		}
	}

	// Malformed fields and zero durations never open.
	for _, w := range []Repeated{
		{Duration: 60, Minutes: "x", Hours: "*", DayOfMonth: "*", Month: "*", DayOfWeek: "*"},
		{Duration: 0, Minutes: "*", Hours: "*", DayOfMonth: "*", Month: "*", DayOfWeek: "*"},
		{Duration: MaxDuration + 1, Minutes: "*", Hours: "*", DayOfMonth: "*", Month: "*", DayOfWeek: "*"},
	} {
		if open, _ := w.OpenAt(at); open {
			t.Errorf("%+v opened", w)
		}
	}
}

func TestRepeatedNext(t *testing.T) {
	w := Repeated{Duration: 600, Minutes: "15,45", Hours: "3", DayOfMonth: "*", Month: "2", DayOfWeek: "*"}
	got, ok := w.Next(unix("2026-11-23T10:00:00Z"))
	if !ok || got != unix("2027-02-01T03:15:00Z") {
		t.Fatalf("Next = %s, %v", time.Unix(got, 0).UTC(), ok)
	}
	got, ok = w.Next(unix("2027-02-01T03:15:01Z"))
	if !ok || got != unix("2027-02-01T03:45:00Z") {
		t.Fatalf("Next = %s, %v", time.Unix(got, 0).UTC(), ok)
	}
	if _, ok := (Repeated{Duration: 60, Minutes: "0", Hours: "0", DayOfMonth: "31", Month: "2", DayOfWeek: "*"}).Next(0); ok {
		t.Fatal("31 February opened")
	}
}

// TestNextAgreesWithOpenAt: at every opening Next finds, OpenAt is open,
// and a second before it (for short windows) it is not.
func TestNextAgreesWithOpenAt(t *testing.T) {
	w := Repeated{Duration: 30, Minutes: "7,37", Hours: "*/x", DayOfMonth: "*", Month: "*", DayOfWeek: "*"}
	if _, ok := w.Next(0); ok {
		t.Fatal("malformed hours opened")
	}
	w.Hours = "1,13"
	at := unix("2026-11-23T00:00:00Z")
	for range 50 {
		next, ok := w.Next(at)
		if !ok {
			t.Fatal("no next")
		}
		if open, closes := w.OpenAt(next); !open || closes != next+30 {
			t.Fatalf("closed at its opening %s", time.Unix(next, 0).UTC())
		}
		if open, _ := w.OpenAt(next - 1); open {
			t.Fatalf("open before its opening %s", time.Unix(next, 0).UTC())
		}
		at = next + 1
	}
}

func FuzzRepeated(f *testing.F) {
	f.Add(uint32(3600), "30", "2", "*", "*", "*", int64(1700000000))
	f.Add(uint32(60), "0,59", "23", "31", "2", "0,6", int64(0))
	f.Fuzz(func(t *testing.T, d uint32, mi, h, dom, mo, dow string, at int64) {
		if at < 0 || at > 1<<40 {
			return
		}
		w := Repeated{Duration: d, Minutes: mi, Hours: h, DayOfMonth: dom, Month: mo, DayOfWeek: dow}
		if open, closes := w.OpenAt(at); open && (closes <= at || closes > at+MaxDuration) {
			t.Fatalf("open at %d closes at %d", at, closes)
		}
		if next, ok := w.Next(at); ok {
			if next < at || !w.Matches(time.Unix(next, 0)) {
				t.Fatalf("Next(%d) = %d does not match", at, next)
			}
		}
	})
}
