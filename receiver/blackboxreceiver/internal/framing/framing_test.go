package framing

import (
	"bytes"
	"strings"
	"testing"
)

type feed struct {
	dir  Dir
	t    int64
	data string
	gap  int64
}

func frame(p Protocol, feeds []feed) ([]Call, Stats) {
	var st Stats
	var calls []Call
	f := New(p, Limits{}, &st, func(c Call) { calls = append(calls, c) })
	var last int64
	for _, x := range feeds {
		if x.gap > 0 {
			f.Gap(x.dir, x.gap)
			continue
		}
		f.Data(x.dir, x.t, []byte(x.data))
		last = x.t
	}
	f.Tick(last + 1e12)
	f.Close(last + 1e12)
	return calls, st
}

func TestHTTPPipelinedHeadAnd100Continue(t *testing.T) {
	calls, st := frame(HTTP, []feed{
		{dir: Request, t: 1, data: "HEAD /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\n\r\n"},
		{dir: Response, t: 2, data: "HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n"}, // HEAD: no body
		{dir: Response, t: 3, data: "HTTP/1.1 204 No Content\r\n\r\n"},
		{dir: Request, t: 4, data: "POST /c HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"},
		{dir: Response, t: 5, data: "HTTP/1.1 100 Continue\r\n\r\n"},
		{dir: Request, t: 6, data: "body"},
		{dir: Response, t: 7, data: "HTTP/1.0 500 Oops\r\n\r\npartial"}, // body until close
		{dir: Response, t: 8, data: " and more"},
	})
	if len(calls) != 3 {
		t.Fatalf("calls %+v stats %+v", calls, st)
	}
	want := []struct {
		method, target string
		status         int
		reqEnd, resp   int64
		end            int64
	}{{"HEAD", "/a", 200, 1, 2, 2}, {"GET", "/b", 204, 1, 3, 3}, {"POST", "/c", 500, 6, 5, 8}}
	for i, w := range want {
		c := calls[i]
		if c.Method != w.method || c.Target != w.target || c.Status != w.status || c.ReqEnd != w.reqEnd || c.RespEnd != w.end {
			t.Errorf("call %d: %+v, want %+v", i, c, w)
		}
	}
	// The final response of the POST started at 7 (the 100 Continue is interim).
	if calls[2].RespStart != 7 {
		t.Errorf("POST response start %d, want 7", calls[2].RespStart)
	}
}

func TestHTTPMalformedResync(t *testing.T) {
	calls, st := frame(HTTP, []feed{
		{dir: Request, t: 1, data: "BOGUS\r\n\r\n"},
		{dir: Request, t: 2, data: "garbage that is not a request"},
		{dir: Request, t: 3, data: "GET /ok HTTP/1.1\r\n\r\n"},
		{dir: Response, t: 4, data: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	})
	if len(calls) != 1 || calls[0].Target != "/ok" || st.Malformed != 1 || st.Resyncs != 1 {
		t.Fatalf("calls %+v stats %+v", calls, st)
	}
}

func TestHTTPHeaderBound(t *testing.T) {
	huge := "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 40<<10) + "\r\n\r\n"
	calls, st := frame(HTTP, []feed{{dir: Request, t: 1, data: huge}})
	if len(calls) != 0 || st.Malformed != 1 {
		t.Fatalf("calls %+v stats %+v", calls, st)
	}
}

func TestHTTPGapInHeadersKeepsPairing(t *testing.T) {
	calls, st := frame(HTTP, []feed{
		{dir: Request, t: 1, data: "GET /lost HTTP/1.1\r\nHo"},
		{dir: Request, gap: 30},
		{dir: Response, t: 2, data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{dir: Request, t: 3, data: "GET /next HTTP/1.1\r\n\r\n"},
		{dir: Response, t: 4, data: "HTTP/1.1 201 OK\r\nContent-Length: 0\r\n\r\n"},
	})
	if len(calls) != 2 || !calls[0].Gap || calls[0].Status != 200 || calls[1].Target != "/next" || calls[1].Status != 201 || calls[1].Gap {
		t.Fatalf("calls %+v stats %+v", calls, st)
	}
}

func TestGenericQuietAndClose(t *testing.T) {
	var st Stats
	var calls []Call
	g := New(Generic, Limits{Quiet: 10}, &st, func(c Call) { calls = append(calls, c) })
	g.Data(Request, 1, []byte("SELECT 1"))
	g.Data(Response, 5, []byte("row"))
	g.Tick(10) // 5 ns quiet: not yet
	if len(calls) != 0 {
		t.Fatal("ended too early")
	}
	g.Tick(15)
	g.Data(Request, 20, []byte("SELECT 2"))
	g.Close(30)
	if len(calls) != 1 || calls[0].RespEnd != 5 || st.Unanswered != 1 || st.GenericTimeout != 1 {
		t.Fatalf("calls %+v stats %+v", calls, st)
	}
}

func TestAutoDetection(t *testing.T) {
	calls, _ := frame(Auto, []feed{
		{dir: Request, t: 1, data: "GET / HTTP/1.1\r\n\r\n"},
		{dir: Response, t: 2, data: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	})
	if len(calls) != 1 || calls[0].Protocol != HTTP {
		t.Fatalf("%+v", calls)
	}
	calls, _ = frame(Auto, []feed{
		{dir: Request, t: 1, data: "\x00\x01binary"},
		{dir: Response, t: 2, data: "\x02"},
	})
	if len(calls) != 1 || calls[0].Protocol != Generic {
		t.Fatalf("%+v", calls)
	}
}

// FuzzHTTPFraming feeds arbitrary bytes, split at arbitrary points and
// interleaved with gaps, to the HTTP framer: it must not panic, must keep its
// buffers bounded, and every call it reports must be well formed.
func FuzzHTTPFraming(f *testing.F) {
	f.Add([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), uint8(5), uint8(0))
	f.Add([]byte("POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
		[]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x\r\nz\r\n0\r\nT: 1\r\n\r\n"), uint8(3), uint8(7))
	f.Add([]byte("HEAD / HTTP/1.0\r\n\r\nGET /2 HTTP/1.1\r\n\r\n"), []byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 NM\r\n\r\nHTTP/1.1 101 Up\r\n\r\n"), uint8(1), uint8(2))
	f.Add([]byte("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), []byte("HTTP/1.1 2000 x\r\n\r\n"), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, req, resp []byte, split, gaps uint8) {
		var st Stats
		var calls []Call
		fr := New(HTTP, Limits{MaxHeader: 1024, MaxPipeline: 4}, &st, func(c Call) { calls = append(calls, c) })
		h := fr.(*httpFramer)
		step := int(split%16) + 1
		tm := int64(1)
		for i := 0; i < len(req) || i < len(resp); i += step {
			for dir, b := range [][]byte{req, resp} {
				if i >= len(b) {
					continue
				}
				chunk := b[i:min(i+step, len(b))]
				if gaps != 0 && (i/step)%int(gaps%5+2) == 0 && i > 0 {
					fr.Gap(Dir(dir), int64(len(chunk)))
				} else {
					fr.Data(Dir(dir), tm, chunk)
				}
				tm++
				for d := range h.dir {
					if cap(h.dir[d].buf) > 64<<10 || len(h.dir[d].buf) > 1024+maxLine+len(chunk) {
						t.Fatalf("buffer grew to %d", len(h.dir[d].buf))
					}
				}
				if len(h.pending) > 4 {
					t.Fatalf("pipeline %d > 4", len(h.pending))
				}
			}
		}
		fr.Close(tm)
		for _, c := range calls {
			if c.ReqStart <= 0 || c.RespEnd < c.RespStart || c.ReqEnd < c.ReqStart || c.Status < 100 || c.Status > 999 {
				t.Fatalf("bad call %+v", c)
			}
			if c.Method != "" && !isTokenPrefix([]byte(c.Method)) {
				t.Fatalf("bad method %q", c.Method)
			}
		}
		if uint64(len(calls)) != st.Calls {
			t.Fatalf("%d calls, %d counted", len(calls), st.Calls)
		}
		_ = bytes.MinRead
	})
}
