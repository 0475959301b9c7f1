// Package timegrid aligns unix seconds to the exporter's windows and hours.
package timegrid // import "github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"

// AlignDown is the start of the r-second slot holding t (t < 0 included).
func AlignDown(t, r int64) int64 {
	m := t % r
	if m < 0 {
		m += r
	}
	return t - m
}
