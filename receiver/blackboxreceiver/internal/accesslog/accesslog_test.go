package accesslog

import (
	"testing"
	"time"
)

func mustCompile(t testing.TB, s Style, f string) *Format {
	t.Helper()
	fm, err := Compile(s, f)
	if err != nil {
		t.Fatal(err)
	}
	return fm
}

func TestNginxTimed(t *testing.T) {
	f := mustCompile(t, Nginx, Presets["nginx_timed"].Format)
	var e Entry
	line := `10.0.0.1 - - [22/Nov/2026:20:41:36 +0000] "GET /txn/Home?u=1 HTTP/1.1" 200 612 "-" "curl/8.5 \"q\"" 0.153`
	if err := f.Parse([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 11, 22, 20, 41, 36, 0, time.UTC).UnixNano()
	if e.End != end || e.End-e.Start != 153*int64(time.Millisecond) {
		t.Errorf("times %d..%d, want end %d and 153 ms", e.Start, e.End, end)
	}
	if e.Method != "GET" || e.Path != "/txn/Home" || e.Query != "u=1" || e.Status != 200 || e.Bytes != 612 || e.Remote != "10.0.0.1" || e.Protocol != "HTTP/1.1" {
		t.Errorf("entry %+v", e)
	}
}

func TestNginxMsecWins(t *testing.T) {
	f := mustCompile(t, Nginx, `$msec $request_method $uri $status $request_time [$time_local]`)
	var e Entry
	if err := f.Parse([]byte(`1700000000.123 POST /op/bid 201 0.004 [14/Nov/2023:22:13:20 +0000]`), &e); err != nil {
		t.Fatal(err)
	}
	if e.End != 1700000000123000000 || e.Start != 1700000000119000000 {
		t.Errorf("times %d..%d", e.Start, e.End)
	}
}

func TestApacheTimed(t *testing.T) {
	f := mustCompile(t, Apache, Presets["apache_timed"].Format)
	var e Entry
	line := `192.168.1.9 - bob [10/Oct/2000:13:55:36 -0700] "POST /cart HTTP/1.0" 503 - "http://r/" "Mozilla" 12345`
	if err := f.Parse([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2000, 10, 10, 20, 55, 36, 0, time.UTC).UnixNano()
	if e.Start != start || e.End-e.Start != 12345*int64(time.Microsecond) || e.Status != 503 || e.Bytes != 0 {
		t.Errorf("entry %+v", e)
	}
	g := mustCompile(t, Apache, `%a %t %{ms}T %m %U%q %>s`)
	if err := g.Parse([]byte(`::1 [10/Oct/2000:13:55:36 -0700] 7 GET /x?y=2 200`), &e); err != nil {
		t.Fatal(err)
	}
	if e.Path != "/x" || e.Query != "y=2" || e.End-e.Start != 7e6 {
		t.Errorf("entry %+v", e)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		s Style
		f string
	}{
		{Nginx, `$remote_addr $status`},         // no response time
		{Nginx, `$request_time $status`},        // no timestamp
		{Nginx, `$msec$request_time`},           // adjacent variables
		{Apache, `%t %{x}T`},                    // bad unit
		{Apache, `%t %D %Z`},                    // unknown directive
		{Nginx, `[$time_local] ${request_time`}, // unclosed brace
		{Apache, `%{Referer`},                   // unclosed %{
	} {
		if _, err := Compile(c.s, c.f); err == nil {
			t.Errorf("%q compiled", c.f)
		}
	}
}

func TestMalformedLines(t *testing.T) {
	f := mustCompile(t, Nginx, Presets["nginx_timed"].Format)
	for _, l := range []string{
		``, `garbage`,
		`10.0.0.1 - - [bad time] "GET / HTTP/1.1" 200 1 "-" "-" 0.1`,
		`10.0.0.1 - - [22/Nov/2026:20:41:36 +0000] "GET / HTTP/1.1" 2x0 1 "-" "-" 0.1`,
		`10.0.0.1 - - [22/Nov/2026:20:41:36 +0000] "GET / HTTP/1.1" 200 1 "-" "-" -0.1`,
		`10.0.0.1 - - [22/Nov/2026:20:41:36 +0000] "GET / HTTP/1.1" 200 1 "-" "-"`,
		`10.0.0.1 - - [22/Nov/2026:20:41:36 +0000] "" 200 1 "-" "-" 0.1`,
	} {
		var e Entry
		if err := f.Parse([]byte(l), &e); err == nil {
			t.Errorf("%q parsed: %+v", l, e)
		}
	}
}

func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		in   string
		unit int64
		want int64
		ok   bool
	}{{"0.153", 1e9, 153e6, true}, {"12", 1e3, 12e3, true}, {"1.5", 1e6, 1500e3, true}, {".5", 1e9, 5e8, true},
		{"", 1e9, 0, false}, {"1e3", 1e9, 0, false}, {"99999999999999999999", 1e9, 0, false}, {".", 1e9, 0, false}} {
		got, ok := decimal([]byte(c.in), c.unit)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("decimal(%q) = %d, %v", c.in, got, ok)
		}
	}
}

// FuzzParse runs arbitrary lines through the preset formats and a format of
// every field: no panic, and a parsed line has a non-negative duration.
func FuzzParse(f *testing.F) {
	formats := []*Format{
		mustCompile(f, Nginx, Presets["nginx_timed"].Format),
		mustCompile(f, Apache, Presets["apache_timed"].Format),
		mustCompile(f, Nginx, `$msec|$request_method|$request_uri|$args|$status|$bytes_sent|$request_time|$host|$server_port|$server_addr|$time_iso8601`),
		mustCompile(f, Apache, `%h %t "%m %U%q %H" %s %B %{us}T %v:%p %A`),
	}
	f.Add([]byte(`10.0.0.1 - - [22/Nov/2026:20:41:36 +0000] "GET /txn/Home HTTP/1.1" 200 612 "-" "curl" 0.153`))
	f.Add([]byte(`1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "POST /c HTTP/1.0" 200 - "-" "M" 12`))
	f.Add([]byte(`1700000000.123|GET|/a?b|b|200|5|0.001|h|80|1.1.1.1|2023-11-14T22:13:20Z`))
	f.Add([]byte(`x [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.1" 200 7 5 h:8080 ::1`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, fm := range formats {
			var e Entry
			if err := fm.Parse(line, &e); err == nil {
				if e.End < e.Start {
					t.Fatalf("negative duration: %+v", e)
				}
				if e.Status != 0 && (e.Status < 100 || e.Status > 999) {
					t.Fatalf("status %d", e.Status)
				}
			}
		}
	})
}
