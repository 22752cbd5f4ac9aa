// Package window decides when maintenance windows are open. The server uses
// it to answer schedule queries at an instant (unixEpoch) and the node
// agent to decide by itself, through a server outage too, whether it may
// update now. It has no dependencies, so the agent stays small.
package window

import (
	"strconv"
	"strings"
	"time"
)

// Single is a one-off window [Start, End) in Unix seconds; End 0 means
// open-ended.
type Single struct {
	Start, End int64
}

// OpenAt reports whether the window contains t and, if so, when it closes
// (0: never).
func (s Single) OpenAt(t int64) (open bool, closes int64) {
	if s.Start <= t && (s.End == 0 || t < s.End) {
		return true, s.End
	}
	return false, 0
}

// Repeated is a window of Duration seconds opening at every minute (UTC)
// that matches its cron fields: each "*" or a comma-separated list of
// numbers, as the API accepts them. As in cron, when both the day of month
// and the day of week are restricted, either may match.
type Repeated struct {
	Duration                                     uint32
	Minutes, Hours, DayOfMonth, Month, DayOfWeek string
}

// MaxDuration is the longest repeated window the API accepts (a day).
const MaxDuration = 86400

// OpenAt reports whether some window of r contains t and, if so, when the
// latest-closing of them closes. Windows last at most a day, so at most
// 1,441 minutes are tried.
func (r Repeated) OpenAt(t int64) (open bool, closes int64) {
	if r.Duration == 0 || r.Duration > MaxDuration {
		return false, 0
	}
	// The latest opening minute at or before t that still covers t
	// closes last: walk back from t's minute.
	first := t - int64(r.Duration) + 1
	for m := t - mod(t, 60); m >= first && m >= 0; m -= 60 {
		if r.Matches(time.Unix(m, 0).UTC()) {
			return true, m + int64(r.Duration)
		}
	}
	return false, 0
}

// Next returns the first opening of r at or after t (rounded up to the
// minute), searching up to a year ahead; ok is false when there is none
// (e.g. "31" of February only).
func (r Repeated) Next(t int64) (opens int64, ok bool) {
	if r.Duration == 0 {
		return 0, false
	}
	m := t + mod(-t, 60)
	end := m + 366*24*3600
	for m <= end {
		ts := time.Unix(m, 0).UTC()
		switch {
		case !r.field(r.Month, int(ts.Month())):
			// Skip to the first minute of the next month.
			y, mo, _ := ts.Date()
			m = time.Date(y, mo+1, 1, 0, 0, 0, 0, time.UTC).Unix()
		case !r.day(ts):
			m = time.Date(ts.Year(), ts.Month(), ts.Day()+1, 0, 0, 0, 0, time.UTC).Unix()
		case !r.field(r.Hours, ts.Hour()):
			m = m - mod(m, 3600) + 3600
		case !r.field(r.Minutes, ts.Minute()):
			m += 60
		default:
			return m, true
		}
	}
	return 0, false
}

// Matches reports whether the minute at ts (UTC) matches r's cron fields.
func (r Repeated) Matches(ts time.Time) bool {
	ts = ts.UTC()
	return r.field(r.Minutes, ts.Minute()) && r.field(r.Hours, ts.Hour()) &&
		r.field(r.Month, int(ts.Month())) && r.day(ts)
}

func (r Repeated) day(ts time.Time) bool {
	dom, dow := r.field(r.DayOfMonth, ts.Day()), r.field(r.DayOfWeek, int(ts.Weekday()))
	if r.DayOfMonth != "*" && r.DayOfWeek != "*" {
		return dom || dow
	}
	return dom && dow
}

// field matches "*" or a comma list of numbers. Anything else matches
// nothing: a malformed field never opens a window.
func (Repeated) field(f string, v int) bool {
	if f == "*" {
		return true
	}
	for p := range strings.SplitSeq(f, ",") {
		if n, err := strconv.Atoi(p); err == nil && n == v {
			return true
		}
	}
	return false
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
