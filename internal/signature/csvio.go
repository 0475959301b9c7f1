package signature

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/inputlimit"
)

// Columns of the window CSV (docs/formats.md §6), in the order written.
var Columns = []string{"window_start", "service", "version", "transaction", "count", "latency_ms",
	"outbound_calls", "outbound_latency_ms", "cpu_utilization"}

// Row is one line of the window CSV.
type Row struct {
	WindowStart time.Time
	Key
	Window
}

// ReadStats summarises a read.
type ReadStats struct {
	Rows int
	// Skipped counts rows that were valid but unusable, by SkipReason name.
	Skipped map[string]int64
	// AllSaturated is true when every row had cpu_utilization ≥ 1, the mark of
	// a utilization given in percent rather than as a fraction.
	AllSaturated bool
}

// LineError is a malformed row; it names the input and the line.
type LineError struct {
	Name string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadCSV reads the window CSV of docs/formats.md §6 and calls fn for every row.
// The header names the columns, in any order; extra columns are ignored. Lines
// starting with '#' are comments. name is used in errors, which are
// *LineError for a malformed line.
func ReadCSV(r io.Reader, name string, fn func(line int, row Row) error) error {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: empty input: no header", name)
	}
	if err != nil {
		return csvErr(name, cr, err)
	}
	line, _ := cr.FieldPos(0)
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range Columns {
		if _, ok := col[c]; !ok {
			return &LineError{name, line, fmt.Errorf("header lacks column %q (needs %s)", c, strings.Join(Columns, ","))}
		}
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return csvErr(name, cr, err)
		}
		line, _ := cr.FieldPos(0)
		row, err := parseRow(rec, col)
		if err != nil {
			return &LineError{name, line, err}
		}
		if err := fn(line, row); err != nil {
			var le *LineError
			if errors.As(err, &le) {
				return err
			}
			return &LineError{name, line, err}
		}
	}
}

func csvErr(name string, cr *csv.Reader, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &LineError{name, pe.Line, pe.Err}
	}
	line, _ := cr.FieldPos(0)
	return &LineError{name, line, err}
}

func parseRow(rec []string, col map[string]int) (Row, error) {
	get := func(c string) (string, error) {
		i := col[c]
		if i >= len(rec) {
			return "", fmt.Errorf("missing column %q (%d fields, want at least %d)", c, len(rec), i+1)
		}
		return strings.TrimSpace(rec[i]), nil
	}
	var row Row
	var err error
	var s string
	if s, err = get("window_start"); err != nil {
		return row, err
	}
	if row.WindowStart, err = parseTime(s); err != nil {
		return row, err
	}
	for _, f := range []struct {
		c   string
		dst *string
	}{{"service", &row.Service}, {"version", &row.Version}, {"transaction", &row.Transaction}} {
		if s, err = get(f.c); err != nil {
			return row, err
		}
		if s == "" {
			return row, fmt.Errorf("%s is empty", f.c)
		}
		*f.dst = s
	}
	ints := []struct {
		c   string
		dst *int64
	}{{"count", &row.Count}, {"outbound_calls", &row.OutboundCalls}}
	for _, f := range ints {
		if s, err = get(f.c); err != nil {
			return row, err
		}
		if *f.dst, err = parseCount(f.c, s); err != nil {
			return row, err
		}
	}
	floats := []struct {
		c   string
		dst *float64
	}{{"latency_ms", &row.LatencyMs}, {"outbound_latency_ms", &row.OutboundLatencyMs}, {"cpu_utilization", &row.CPUUtilization}}
	for _, f := range floats {
		if s, err = get(f.c); err != nil {
			return row, err
		}
		v, err := inputlimit.Float(s, maxRowValue)
		if err != nil {
			return row, fmt.Errorf("%s %v", f.c, err)
		}
		*f.dst = v
	}
	if err := row.Window.Validate(); err != nil {
		return row, err
	}
	return row, nil
}

// maxRowValue bounds a latency (ms) or utilization: larger ones are no
// measurement and overflow the least squares.
const maxRowValue = 1e12

func parseCount(c, s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%s %d < 0", c, n)
		}
		return n, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || v < 0 || v > 9e18 {
		return 0, fmt.Errorf("%s %q is not a whole number ≥ 0", c, s)
	}
	return int64(v), nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
		sec, frac := math.Modf(v)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("window_start %q is neither RFC 3339 nor Unix seconds", s)
}

// ReadProfiles reads the window CSV into one profile per key, in key order.
func ReadProfiles(r io.Reader, name string) ([]*Profile, ReadStats, error) {
	profiles := map[Key]*Profile{}
	st := ReadStats{Skipped: map[string]int64{}}
	saturated := 0
	err := ReadCSV(r, name, func(line int, row Row) error {
		st.Rows++
		p := profiles[row.Key]
		if p == nil {
			p = NewProfile(row.Key)
			profiles[row.Key] = p
		}
		added, reason, err := p.Add(row.Window)
		if err != nil {
			return err
		}
		if !added {
			st.Skipped[reason.String()]++
			if reason == SkipSaturated {
				saturated++
			}
		}
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	st.AllSaturated = st.Rows > 0 && saturated == st.Rows
	out := make([]*Profile, 0, len(profiles))
	for _, p := range profiles {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Profile) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Transaction, b.Transaction))
	})
	return out, st, nil
}

// WriteCSV writes rows as the window CSV, header first. Numbers are written
// with the fewest digits that read back to the same float64.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return err
	}
	rec := make([]string, len(Columns))
	for _, r := range rows {
		rec[0] = r.WindowStart.UTC().Format(time.RFC3339)
		rec[1], rec[2], rec[3] = r.Service, r.Version, r.Transaction
		rec[4] = strconv.FormatInt(r.Count, 10)
		rec[5] = strconv.FormatFloat(r.LatencyMs, 'f', -1, 64)
		rec[6] = strconv.FormatInt(r.OutboundCalls, 10)
		rec[7] = strconv.FormatFloat(r.OutboundLatencyMs, 'f', -1, 64)
		rec[8] = strconv.FormatFloat(r.CPUUtilization, 'f', -1, 64)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
