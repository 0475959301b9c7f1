package bpffilter

import (
	"net/netip"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/pkttest"
)

func vm(t *testing.T, ports []uint16, hosts []string) *bpf.VM {
	t.Helper()
	var hs []netip.Addr
	for _, h := range hosts {
		hs = append(hs, netip.MustParseAddr(h))
	}
	raw, err := Compile(ports, hs, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("cannot disassemble")
	}
	v, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestFilter(t *testing.T) {
	tcp := func(src, dst string) []byte {
		return pkttest.Packet(ap(src), ap(dst), 1, 1, packet.FlagACK, []byte("data"))
	}
	udp := tcp("10.0.0.1:5000", "10.0.0.2:8080")
	udp[9] = 17
	frag := tcp("10.0.0.1:5000", "10.0.0.2:8080")
	frag[7] = 10 // fragment offset 10
	cases := []struct {
		name   string
		ports  []uint16
		hosts  []string
		pkt    []byte
		accept bool
	}{
		{"any tcp", nil, nil, tcp("10.0.0.1:5000", "10.0.0.2:8080"), true},
		{"udp", nil, nil, udp, false},
		{"later fragment", nil, nil, frag, false},
		{"dst port", []uint16{8080}, nil, tcp("10.0.0.1:5000", "10.0.0.2:8080"), true},
		{"src port", []uint16{8080}, nil, tcp("10.0.0.2:8080", "10.0.0.1:5000"), true},
		{"other port", []uint16{8080, 5432}, nil, tcp("10.0.0.1:5000", "10.0.0.2:9090"), false},
		{"host", nil, []string{"10.0.0.2"}, tcp("10.0.0.1:5000", "10.0.0.2:9090"), true},
		{"other host", nil, []string{"10.0.0.3", "fd00::2"}, tcp("10.0.0.1:5000", "10.0.0.2:9090"), false},
		{"port and host", []uint16{9090}, []string{"10.0.0.2"}, tcp("10.0.0.2:9090", "10.0.0.1:5000"), true},
		{"port, not host", []uint16{9090}, []string{"10.0.0.9"}, tcp("10.0.0.2:9090", "10.0.0.1:5000"), false},
		{"v6 any", nil, nil, tcp("[fd00::1]:5000", "[fd00::2]:80"), true},
		{"v6 port", []uint16{80}, nil, tcp("[fd00::1]:5000", "[fd00::2]:80"), true},
		{"v6 other port", []uint16{81}, nil, tcp("[fd00::1]:5000", "[fd00::2]:80"), false},
		{"v6 host", []uint16{80}, []string{"10.0.0.1", "fd00::2"}, tcp("[fd00::2]:80", "[fd00::1]:5000"), true},
		{"v6 host prefix only", nil, []string{"fd00::2:0"}, tcp("[fd00::1]:5000", "[fd00::2]:80"), false},
		{"v6 other host", nil, []string{"fd00::3"}, tcp("[fd00::1]:5000", "[fd00::2]:80"), false},
		{"garbage", nil, nil, []byte{0x12, 0x34}, false},
	}
	for _, c := range cases {
		got, err := vm(t, c.ports, c.hosts).Run(c.pkt)
		if err != nil {
			// The VM fails on out-of-bounds loads, as the kernel drops them.
			got = 0
		}
		if (got > 0) != c.accept {
			t.Errorf("%s: verdict %d, want accept=%v", c.name, got, c.accept)
		}
		if got > 0 && got != 1000 {
			t.Errorf("%s: snaplen %d", c.name, got)
		}
	}
}

func TestManyTerms(t *testing.T) {
	var ports []uint16
	var hosts []string
	for i := range 60 {
		ports = append(ports, uint16(1000+i))
		hosts = append(hosts, netip.AddrFrom16([16]byte{0xfd, 15: byte(i)}).String())
	}
	hosts = append(hosts[:60], "10.9.9.9")
	v := vm(t, ports, hosts)
	pkt := pkttest.Packet(ap("[fd00::3]:1059"), ap("[fd00::99]:2"), 1, 1, packet.FlagACK, nil)
	if got, _ := v.Run(pkt); got == 0 {
		t.Error("the last port and an early host did not match")
	}
	if _, err := Compile(ports, make([]netip.Addr, MaxTerms), 0); err == nil {
		t.Error("too many terms compiled")
	}
}
