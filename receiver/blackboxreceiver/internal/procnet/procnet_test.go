package procnet

import (
	"io/fs"
	"net/netip"
	"strings"
	"testing"
	"testing/fstest"
)

const tcp4 = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:0000 00:00000000 00000000     0        0 100 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:A2C4 01 00000000:0000 00:00000000 00000000     0        0 101 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:A2C4 0100007F:1F90 01 00000000:0000 00:00000000 00000000     0        0 102 1 0000000000000000 20 4 30 10 -1
   3: 0A01A8C0:B5E2 0B01A8C0:1538 01 00000000:0000 00:00000000 00000000     0        0 103 1 0000000000000000 20 4 30 10 -1
   4: 0A01A8C0:B5E3 0B01A8C0:1538 01 00000000:0000 00:00000000 00000000     0        0 104 1 0000000000000000 20 4 30 10 -1
   5: garbage
   6: 0A01A8C0:0016 0C01A8C0:D431 01 00000000:0000 00:00000000 00000000     0        0 105 1 0000000000000000 20 4 30 10 -1
   7: 0A01A8C0:B5E4 0B01A8C0:1538 06 00000000:0000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`

const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:0000 00:00000000 00000000     0        0 200 1 0000000000000000 100 0 0 10 0
   1: 000080FE00000000FF0F0000010000FE:C350 000080FE00000000FF0F0000020000FE:0050 01 00000000:0000 00:00000000 00000000     0        0 201 1 0000000000000000 20 4 30 10 -1
`

func TestParseTCP(t *testing.T) {
	socks, bad, err := ParseTCP(strings.NewReader(tcp4))
	if err != nil || bad != 1 || len(socks) != 7 {
		t.Fatalf("%d sockets, %d bad, %v", len(socks), bad, err)
	}
	if s := socks[3]; s.Local != netip.MustParseAddrPort("192.168.1.10:46562") || s.Remote != netip.MustParseAddrPort("192.168.1.11:5432") || s.State != StateEstablished || s.Inode != 103 {
		t.Errorf("socket %+v", s)
	}
	socks6, _, err := ParseTCP(strings.NewReader(tcp6))
	if err != nil || len(socks6) != 2 {
		t.Fatal(err)
	}
	if s := socks6[1]; s.Local != netip.MustParseAddrPort("[fe80::fff:fe00:1]:50000") || s.Remote.Port() != 80 {
		t.Errorf("v6 socket %+v", s)
	}
}

func TestLinks(t *testing.T) {
	socks, _, _ := ParseTCP(strings.NewReader(tcp4))
	socks6, _, _ := ParseTCP(strings.NewReader(tcp6))
	socks = append(socks, socks6...)
	link := func(target string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink}
	}
	proc := fstest.MapFS{
		"10/comm": {Data: []byte("server\n")},
		"10/fd/0": link("/dev/null"),
		"10/fd/3": link("socket:[101]"),
		"20/comm": {Data: []byte("client\n")},
		"20/fd/3": link("socket:[102]"),
		"20/fd/4": link("socket:[103]"),
		"20/fd/5": link("socket:[104]"),
		"30/comm": {Data: []byte("sshd\n")},
		"30/fd/7": link("socket:[105]"),
		"self":    {Mode: fs.ModeDir},
	}
	owners, err := SocketOwners(proc, 0)
	if err != nil {
		t.Fatal(err)
	}
	if owners[101] != (Process{10, "server"}) || owners[104] != (Process{20, "client"}) || len(owners) != 5 {
		t.Fatalf("owners %v", owners)
	}
	links := Links(socks, owners, PortRange{32768, 60999})
	got := map[string]int{}
	for _, l := range links {
		got[l.Source.String()+"("+l.SourceComm+")->"+l.Destination.String()+"("+l.DestComm+")"] = l.Connections
	}
	want := map[string]int{
		// Loopback: both ends local, one connection, both processes.
		"127.0.0.1:0(client)->127.0.0.1:8080(server)": 1,
		// Two connections from ephemeral ports: one link.
		"192.168.1.10:0(client)->192.168.1.11:5432()": 2,
		// An inbound connection to a listening port: the remote is the client.
		"192.168.1.12:0()->192.168.1.10:22(sshd)": 1,
		// Not ephemeral in the v6 sense? 50000 is: zeroed.
		"[fe80::fff:fe00:1]:0()->[fe80::fff:fe00:2]:80()": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("link %s: %d connections, want %d (got %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("links %v", got)
	}
	// A port outside the ephemeral range is kept.
	if l := Links(socks, owners, PortRange{60000, 61000}); !strings.Contains(l[1].Source.String(), ":46562") {
		t.Errorf("a non-ephemeral client port was zeroed: %+v", l)
	}
}

func TestPortRange(t *testing.T) {
	r, err := ParsePortRange("32768\t60999\n")
	if err != nil || r != (PortRange{32768, 60999}) || !r.Contains(32768) || r.Contains(61000) {
		t.Fatalf("%v %v", r, err)
	}
	for _, bad := range []string{"", "1", "5 4", "a b", "1 70000"} {
		if _, err := ParsePortRange(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
