package packet_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/pkttest"
)

func TestDecode(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:80")
	p := pkttest.Packet(src, dst, 7, 9, packet.FlagACK|packet.FlagPSH, []byte("hello"))
	var s packet.TCP
	if err := packet.DecodeIP(p, &s); err != nil {
		t.Fatal(err)
	}
	if s.Src != src || s.Dst != dst || s.Seq != 7 || s.Ack != 9 || string(s.Payload) != "hello" || s.Truncated != 0 {
		t.Errorf("%+v", s)
	}
	// Link padding past the IP total length is not payload.
	if err := packet.DecodeIP(append(p, 0, 0, 0), &s); err != nil || string(s.Payload) != "hello" {
		t.Errorf("padding: %q %v", s.Payload, err)
	}
	// A snap length that cut the payload.
	if err := packet.DecodeIP(p[:len(p)-2], &s); err != nil || string(s.Payload) != "hel" || s.Truncated != 2 {
		t.Errorf("truncated: %q %d %v", s.Payload, s.Truncated, err)
	}
	// IPv6 with a hop-by-hop extension header before TCP.
	v6 := pkttest.Packet(netip.MustParseAddrPort("[fd00::1]:1"), netip.MustParseAddrPort("[fd00::2]:2"), 1, 0, packet.FlagSYN, []byte("x"))
	ext := append(append([]byte{}, v6[:40]...), 6, 0, 0, 0, 0, 0, 0, 0)
	ext = append(ext, v6[40:]...)
	ext[6] = 0  // next header: hop-by-hop
	ext[5] += 8 // payload length
	if err := packet.DecodeIP(ext, &s); err != nil || s.Dst.Port() != 2 || string(s.Payload) != "x" {
		t.Errorf("v6 ext: %+v %v", s, err)
	}
	frag := append([]byte{}, p...)
	frag[6], frag[7] = 0, 8 // fragment offset 8
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":     {nil, packet.ErrTruncated},
		"v5":        {[]byte{0x50}, packet.ErrBadHeader},
		"short v4":  {p[:19], packet.ErrTruncated},
		"short tcp": {p[:30], packet.ErrTruncated},
		"fragment":  {frag, packet.ErrNotTCP},
		"udp":       {func() []byte { q := append([]byte{}, p...); q[9] = 17; return q }(), packet.ErrNotTCP},
		"bad ihl":   {func() []byte { q := append([]byte{}, p...); q[0] = 0x41; return q }(), packet.ErrBadHeader},
		"bad doff":  {func() []byte { q := append([]byte{}, p...); q[32] = 0xf0; return q }(), packet.ErrBadHeader},
	} {
		if err := packet.DecodeIP(c.b, &s); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
