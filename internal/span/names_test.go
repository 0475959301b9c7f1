package span

import (
	"reflect"
	"testing"
)

func TestNames(t *testing.T) {
	n := NewNames()
	web, app := n.ID("web"), n.ID("app")
	if n.ID("web") != web || web == app || n.Len() != 2 {
		t.Fatalf("ids web %d app %d, %d names", web, app, n.Len())
	}
	if n.Lookup("app") != app || n.Lookup("db") != -1 || n.Len() != 2 {
		t.Fatal("lookup interns nothing")
	}
	if n.Optional("") != -1 || n.Name(-1) != "" || n.Name(app) != "app" {
		t.Fatal("unknown names are -1 and \"\"")
	}
	if empty := n.ID(""); n.Name(empty) != "" || empty < 0 {
		t.Fatal("\"\" may be a name")
	}
	n.Reset()
	if n.Len() != 0 || n.ID("app") != 0 {
		t.Fatal("reset")
	}
}

// Reintern moves every name of a span, and only those, to another table: the
// span reads the same there.
func TestReintern(t *testing.T) {
	from, to := NewNames(), NewNames()
	for i := range 10 {
		from.ID(string(rune('a' + i))) // names no span holds
	}
	named := func(n *Names, s *Span) []string {
		var out []string
		v := reflect.ValueOf(s).Elem()
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Int32 && v.Type().Field(i).Name != "Parent" {
				out = append(out, v.Type().Field(i).Name+"="+n.Name(int32(f.Int())))
			}
		}
		return out
	}
	// Every name field set, each to a name of its own, but Host unknown and
	// Name "".
	s := Span{ID: 7, ParentID: 3, Parent: 2, Kind: KindClient, Error: true}
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int32 && v.Type().Field(i).Name != "Parent" {
			f.SetInt(int64(from.ID("name of " + v.Type().Field(i).Name)))
		}
	}
	s.Host, s.Name = -1, from.ID("")
	want := named(from, &s)
	r := s
	r.Reintern(from, to)
	if got := named(to, &r); !reflect.DeepEqual(got, want) {
		t.Fatalf("reinterned %v, want %v", got, want)
	}
	if r.ID != 7 || r.ParentID != 3 || r.Parent != 2 || r.Host != -1 || !r.Error || r.Kind != KindClient {
		t.Fatalf("other fields changed: %+v", r)
	}
	if to.Len() != len(want)-1 { // Host is unknown
		t.Fatalf("%d names moved, want %d", to.Len(), len(want)-1)
	}
}
