package spectral

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tierscope/tierscope/internal/inputlimit"
)

// Sample is one request: when it happened, its transaction type and its
// response time.
type Sample struct {
	// Time is in Unix seconds. Binning uses it, so every sample of one series
	// must use the same convention (the start of the request, say).
	Time        float64
	Transaction string
	Ms          float64
}

// A sample's bounds: Unix seconds to the year 5138, response times to 11
// days. Beyond them squares overflow and the spectra turn NaN.
const (
	maxSampleTime = 1e11
	maxSampleMs   = 1e9
)

// ReadSamples reads the sample file of docs/formats.md §7:
//
//	timestamp,transaction,response_time_ms
//	1661140374.351773,PutBid,229.4
//
// The header line is optional; blank lines and lines starting with # are
// skipped. Samples are returned sorted by time (stable, so equal times keep
// their file order). Errors name the file and the line.
func ReadSamples(r io.Reader, name string) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Sample
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		f := strings.Split(text, ",")
		if len(out) == 0 && len(f) > 0 && strings.EqualFold(strings.TrimSpace(f[0]), "timestamp") {
			continue // header
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want 3 comma-separated fields (timestamp,transaction,response_time_ms), got %d", name, line, len(f))
		}
		ts, err := inputlimit.Float(strings.TrimSpace(f[0]), maxSampleTime)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: bad timestamp: %v", name, line, err)
		}
		tx := strings.TrimSpace(f[1])
		if tx == "" {
			return nil, fmt.Errorf("%s:%d: empty transaction", name, line)
		}
		ms, err := inputlimit.Float(strings.TrimSpace(f[2]), maxSampleMs)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%s:%d: bad response_time_ms %q (want a number in [0, %g]): %v", name, line, f[2], maxSampleMs, err)
		}
		out = append(out, Sample{Time: ts, Transaction: tx, Ms: ms})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	slices.SortStableFunc(out, func(a, b Sample) int {
		switch {
		case a.Time < b.Time:
			return -1
		case a.Time > b.Time:
			return 1
		}
		return 0
	})
	return out, nil
}

// Times returns the times of the samples of one transaction, in order.
func Times(samples []Sample, transaction string) []float64 {
	var out []float64
	for _, s := range samples {
		if s.Transaction == transaction {
			out = append(out, s.Time)
		}
	}
	return out
}
