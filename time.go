package eim

import (
	"strings"
	"time"
)

// Time is a UTC instant with millisecond precision, rendered in JSON as
// ISO-8601 with exactly three fractional digits ("2026-11-21T10:00:00.000Z"),
// as the original API renders its timestamps.
type Time struct{ time.Time }

// NewTime truncates t to milliseconds in UTC.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// TimeFromUnixMilli converts a stored value back to a Time.
func TimeFromUnixMilli(ms int64) Time { return Time{time.UnixMilli(ms).UTC()} }

const timeLayout = "2006-01-02T15:04:05.000Z"

// MarshalJSON renders the time, or null when it is zero.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(timeLayout) + `"`), nil
}

// UnmarshalJSON accepts RFC 3339 with any fractional precision, or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		*t = Time{}
		return nil
	}
	v, err := time.Parse(time.RFC3339Nano, strings.Trim(s, `"`))
	if err != nil {
		return Errorf(EINVALID, "%s is not an RFC 3339 time", s)
	}
	*t = NewTime(v)
	return nil
}
