package stitch

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// builder makes test traces: one resource per service.
type builder struct {
	td  ptrace.Traces
	res map[string]ptrace.SpanSlice
	seq byte
}

func newBuilder() *builder {
	return &builder{td: ptrace.NewTraces(), res: map[string]ptrace.SpanSlice{}}
}

func (b *builder) span(service, name string, kind ptrace.SpanKind, trace byte, parent pcommon.SpanID, startMs, endMs float64) ptrace.Span {
	ss, ok := b.res[service]
	if !ok {
		rs := b.td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		ss = rs.ScopeSpans().AppendEmpty().Spans()
		b.res[service] = ss
	}
	b.seq++
	s := ss.AppendEmpty()
	s.SetName(name)
	s.SetKind(kind)
	s.SetTraceID(pcommon.TraceID{trace, 1})
	s.SetSpanID(pcommon.SpanID{b.seq, 2})
	s.SetParentSpanID(parent)
	base := time.Unix(1700000000, 0)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(startMs * float64(time.Millisecond)))))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(endMs * float64(time.Millisecond)))))
	return s
}

var noParent = pcommon.SpanID{}

// A web → app call whose context was dropped at the app: the app SERVER span is a
// root of its own trace, with a child of its own.
func brokenCall(b *builder, trace, appTrace byte, at float64) (client, server, child ptrace.Span) {
	root := b.span("web", "GET /", ptrace.SpanKindServer, trace, noParent, at, at+50)
	client = b.span("web", "GET app", ptrace.SpanKindClient, trace, root.SpanID(), at+5, at+40)
	client.Attributes().PutStr("server.address", "app")
	client.Attributes().PutInt("server.port", 8080)
	server = b.span("app", "GET /items", ptrace.SpanKindServer, appTrace, noParent, at+6, at+39)
	child = b.span("app", "SELECT items", ptrace.SpanKindClient, appTrace, server.SpanID(), at+10, at+20)
	child.Attributes().PutStr("db.system.name", "postgresql")
	return client, server, child
}

func mustNew(t *testing.T, mode Mode) *Stitcher {
	t.Helper()
	opt := DefaultOptions()
	opt.Mode = mode
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReparentMovesTheSubtree(t *testing.T) {
	b := newBuilder()
	client, server, child := brokenCall(b, 1, 2, 0)
	rep := mustNew(t, ModeReparent).Stitch(b.td)
	if rep.Spans != 4 || rep.Orphans != 2 || rep.Inferred != 1 || rep.LeftOrphan != 1 {
		t.Fatalf("report %+v", rep)
	}
	if server.ParentSpanID() != client.SpanID() || server.TraceID() != client.TraceID() || child.TraceID() != client.TraceID() {
		t.Fatalf("server parent %v trace %v, child trace %v; want %v in %v", server.ParentSpanID(), server.TraceID(), child.TraceID(), client.SpanID(), client.TraceID())
	}
	if v, _ := server.Attributes().Get(AttrInferredParent); v.Str() != client.SpanID().String() {
		t.Fatalf("inferred parent attribute %q", v.Str())
	}
	sig, _ := client.Attributes().Get(AttrPathSignature)
	if want := "web(app(postgresql))"; sig.Str() != want {
		t.Fatalf("path signature %q, want %q", sig.Str(), want)
	}
	if child.ParentSpanID() != server.SpanID() {
		t.Fatal("an intact link was changed")
	}
}

func TestLinkAndAnnotateKeepStructure(t *testing.T) {
	for _, mode := range []Mode{ModeLink, ModeAnnotate} {
		b := newBuilder()
		client, server, _ := brokenCall(b, 1, 2, 0)
		mustNew(t, mode).Stitch(b.td)
		if !server.ParentSpanID().IsEmpty() || server.TraceID() == client.TraceID() {
			t.Fatalf("%v rewrote the context", mode)
		}
		wantLinks := 0
		if mode == ModeLink {
			wantLinks = 1
			if l := server.Links().At(0); l.SpanID() != client.SpanID() || l.TraceID() != client.TraceID() {
				t.Fatalf("link points at %v/%v", l.TraceID(), l.SpanID())
			}
		}
		if server.Links().Len() != wantLinks {
			t.Fatalf("%v: %d links", mode, server.Links().Len())
		}
	}
}

// Peers learned from intact calls resolve the calls that lost context, so a
// server is not attached to a client that called another service.
func TestAddressBookResolvesPeers(t *testing.T) {
	b := newBuilder()
	// An intact call teaches that "app:8080" is service app.
	root := b.span("web", "GET /", ptrace.SpanKindServer, 9, noParent, 0, 50)
	c := b.span("web", "GET app", ptrace.SpanKindClient, 9, root.SpanID(), 5, 40)
	c.Attributes().PutStr("server.address", "app")
	c.Attributes().PutInt("server.port", 8080)
	b.span("app", "GET /items", ptrace.SpanKindServer, 9, c.SpanID(), 6, 39)
	// Later, web calls auth (which is uninstrumented here) around an orphan app span:
	// only the call to app may be its parent.
	root2 := b.span("web", "GET /", ptrace.SpanKindServer, 8, noParent, 100, 200)
	toAuth := b.span("web", "GET auth", ptrace.SpanKindClient, 8, root2.SpanID(), 101, 190)
	toAuth.Attributes().PutStr("server.address", "auth")
	toAuth.Attributes().PutInt("server.port", 8080)
	toApp := b.span("web", "GET app", ptrace.SpanKindClient, 8, root2.SpanID(), 102, 180)
	toApp.Attributes().PutStr("server.address", "app")
	toApp.Attributes().PutInt("server.port", 8080)
	orphan := b.span("app", "GET /items", ptrace.SpanKindServer, 7, noParent, 103, 179)
	mustNew(t, ModeAnnotate).Stitch(b.td)
	if v, _ := orphan.Attributes().Get(AttrInferredParent); v.Str() != toApp.SpanID().String() {
		t.Fatalf("orphan attached to %s, want the call to app %s", v.Str(), toApp.SpanID())
	}
}

// Bad spans pass through untouched and counted; nothing is lost or crashes.
func TestBadSpansPassThrough(t *testing.T) {
	b := newBuilder()
	brokenCall(b, 1, 2, 0)
	noTrace := b.span("app", "no trace id", ptrace.SpanKindServer, 0, noParent, 6, 30)
	noTrace.SetTraceID(pcommon.TraceID{})
	noSpan := b.span("app", "no span id", ptrace.SpanKindServer, 3, noParent, 6, 30)
	noSpan.SetSpanID(pcommon.SpanID{})
	backwards := b.span("app", "ends before it starts", ptrace.SpanKindServer, 4, noParent, 30, 6)
	b.span("app", "instant", ptrace.SpanKindServer, 5, noParent, 7, 7)
	odd := b.span("app", "unknown kind", ptrace.SpanKind(42), 6, noParent, 8, 9)
	huge := b.span("web", "huge attribute", ptrace.SpanKindClient, 1, noParent, 5, 40)
	huge.Attributes().PutStr("server.address", strings.Repeat("x", 1<<20))
	before := map[string]int{}
	ForEachSpan(b.td, func(s ptrace.Span) { before[s.Name()] = s.Attributes().Len() })

	rep := mustNew(t, ModeReparent).Stitch(b.td)
	if rep.Spans != 10 || rep.Skipped != 3 || rep.ZeroDuration != 1 || rep.UnknownKind != 1 || rep.LongAttributes != 1 {
		t.Fatalf("report %+v", rep)
	}
	for _, s := range []ptrace.Span{noTrace, noSpan, backwards} {
		if s.Attributes().Len() != before[s.Name()] || !s.ParentSpanID().IsEmpty() {
			t.Errorf("%q was touched", s.Name())
		}
	}
	if odd.Kind() != ptrace.SpanKind(42) {
		t.Error("the unknown kind was rewritten")
	}
	if n := b.td.SpanCount(); n != 10 {
		t.Fatalf("%d spans after stitching, want 10", n)
	}
}

func TestStitchWithContextLeavesWaitingSpansAlone(t *testing.T) {
	older, younger := newBuilder(), newBuilder()
	brokenCall(older, 1, 2, 0)
	// A late orphan, still waiting: it may serve as context but is not stitched yet.
	late := younger.span("app", "GET /items", ptrace.SpanKindServer, 3, noParent, 7, 38)
	rep := mustNew(t, ModeReparent).StitchWithContext([]ptrace.Traces{older.td}, []ptrace.Traces{younger.td})
	if rep.Spans != 4 || rep.Inferred != 1 {
		t.Fatalf("report %+v", rep)
	}
	if late.Attributes().Len() != 0 || !late.ParentSpanID().IsEmpty() {
		t.Fatal("a waiting span was stitched or tagged")
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeReparent, ModeLink, ModeAnnotate} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("glue"); err == nil {
		t.Error("ParseMode accepted glue")
	}
}

// In every mode an orphan below the minimum confidence keeps its best
// candidate in the attributes and is scored, without a parent written (a
// shared slice once lost the candidate and the score indexed -1).
func TestAbstentionInEveryMode(t *testing.T) {
	for _, mode := range []Mode{ModeReparent, ModeLink, ModeAnnotate} {
		b := newBuilder()
		// Two identical callers: the server cannot tell them apart.
		root := b.span("web", "GET /", ptrace.SpanKindServer, 1, noParent, 0, 100)
		for i := 0; i < 2; i++ {
			c := b.span("web", "GET app", ptrace.SpanKindClient, 1, root.SpanID(), 5, 60)
			c.Attributes().PutStr("server.address", "app")
		}
		server := b.span("app", "GET /items", ptrace.SpanKindServer, 2, noParent, 10, 50)
		server.Attributes().PutStr(AttrTruthParent, root.SpanID().String())
		opt := DefaultOptions()
		opt.Mode = mode
		s, err := New(opt)
		if err != nil {
			t.Fatal(err)
		}
		rep := s.Stitch(b.td)
		if rep.Abstained != 1 || !server.ParentSpanID().IsEmpty() {
			t.Fatalf("%v: abstained %d, parent %v", mode, rep.Abstained, server.ParentSpanID())
		}
		if _, ok := server.Attributes().Get(AttrInferredParent); !ok {
			t.Fatalf("%v: the best candidate was not annotated", mode)
		}
		if rep.Truth == nil || rep.Truth.Written != 0 {
			t.Fatalf("%v: truth %+v", mode, rep.Truth)
		}
	}
}
