package httpapi

import (
	"testing"
	"time"
)

// TestParseTimeRefusesOverflow: a time past 2262 used to wrap round to 1677.
func TestParseTimeRefusesOverflow(t *testing.T) {
	for _, s := range []string{"99999999999", "1e300", "NaN", "+Inf", "-1", "9223372037", "9999-01-01T00:00:00Z", "1600-01-01T00:00:00Z"} {
		if got, err := parseTime(s); err == nil {
			t.Errorf("parseTime(%q) = %v, want an out-of-range error", s, got)
		}
	}
	for s, want := range map[string]time.Time{
		"1700000000.5":         time.Unix(1700000000, 5e8),
		"9223372035":           time.Unix(9223372035, 0),
		"2026-11-27T23:00:00Z": time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC),
	} {
		got, err := parseTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
}
