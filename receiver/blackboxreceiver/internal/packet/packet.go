// Package packet decodes the IPv4, IPv6 and TCP headers of a captured packet,
// starting at the network header (the layout of an AF_PACKET SOCK_DGRAM socket).
// It is pure and allocation-free: the payload aliases the input.
package packet

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// TCP flags.
const (
	FlagFIN = 0x01
	FlagSYN = 0x02
	FlagRST = 0x04
	FlagPSH = 0x08
	FlagACK = 0x10
)

// Decode errors. ErrNotTCP is not a malformation: the filter may let other
// protocols through, and fragments after the first carry no TCP header.
var (
	ErrTruncated = errors.New("packet: truncated header")
	ErrBadHeader = errors.New("packet: malformed header")
	ErrNotTCP    = errors.New("packet: not TCP")
)

// TCP is a decoded TCP segment.
type TCP struct {
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	Flags    uint8
	// Payload is the segment's data as captured (it may be shorter than the
	// segment when the capture was truncated: see Truncated).
	Payload []byte
	// Truncated counts the bytes of the segment that were not captured.
	Truncated int
}

// DecodeIP decodes an IPv4 or IPv6 packet carrying TCP, as given by the IP
// version nibble. It returns ErrNotTCP for other protocols and for non-first
// fragments, and ErrTruncated or ErrBadHeader for malformed packets.
func DecodeIP(b []byte, seg *TCP) error {
	if len(b) < 1 {
		return ErrTruncated
	}
	switch b[0] >> 4 {
	case 4:
		return decodeIPv4(b, seg)
	case 6:
		return decodeIPv6(b, seg)
	}
	return ErrBadHeader
}

func decodeIPv4(b []byte, seg *TCP) error {
	if len(b) < 20 {
		return ErrTruncated
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if ihl < 20 || total < ihl {
		return ErrBadHeader
	}
	if len(b) < ihl {
		return ErrTruncated
	}
	if b[9] != 6 {
		return ErrNotTCP
	}
	if frag := binary.BigEndian.Uint16(b[6:8]); frag&0x1fff != 0 {
		return ErrNotTCP // a later fragment: no TCP header
	}
	src := netip.AddrFrom4([4]byte(b[12:16]))
	dst := netip.AddrFrom4([4]byte(b[16:20]))
	// The captured bytes past the IP total length are link padding.
	avail := min(len(b), total)
	return decodeTCP(b[ihl:avail], total-ihl, src, dst, seg)
}

// IPv6 extension headers that may stand between the fixed header and TCP.
const (
	ipv6HopByHop = 0
	ipv6Routing  = 43
	ipv6Fragment = 44
	ipv6DestOpts = 60
	ipv6TCP      = 6
)

func decodeIPv6(b []byte, seg *TCP) error {
	if len(b) < 40 {
		return ErrTruncated
	}
	payloadLen := int(binary.BigEndian.Uint16(b[4:6]))
	next := b[6]
	src := netip.AddrFrom16([16]byte(b[8:24]))
	dst := netip.AddrFrom16([16]byte(b[24:40]))
	off := 40
	for hops := 0; next != ipv6TCP; hops++ {
		if hops > 8 {
			return ErrBadHeader
		}
		switch next {
		case ipv6HopByHop, ipv6Routing, ipv6DestOpts:
			if len(b) < off+8 {
				return ErrTruncated
			}
			next = b[off]
			off += (int(b[off+1]) + 1) * 8
		case ipv6Fragment:
			if len(b) < off+8 {
				return ErrTruncated
			}
			if binary.BigEndian.Uint16(b[off+2:off+4])&0xfff8 != 0 {
				return ErrNotTCP // a later fragment
			}
			next = b[off]
			off += 8
		default:
			return ErrNotTCP
		}
	}
	end := 40 + payloadLen
	if end < off {
		return ErrBadHeader
	}
	if len(b) < off {
		return ErrTruncated
	}
	avail := min(len(b), end)
	return decodeTCP(b[off:avail], end-off, src, dst, seg)
}

// decodeTCP decodes a TCP header; b holds the captured part of a segment of
// length total.
func decodeTCP(b []byte, total int, src, dst netip.Addr, seg *TCP) error {
	if len(b) < 20 {
		return ErrTruncated
	}
	doff := int(b[12]>>4) * 4
	if doff < 20 || doff > total {
		return ErrBadHeader
	}
	if len(b) < doff {
		return ErrTruncated
	}
	seg.Src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(b[0:2]))
	seg.Dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(b[2:4]))
	seg.Seq = binary.BigEndian.Uint32(b[4:8])
	seg.Ack = binary.BigEndian.Uint32(b[8:12])
	seg.Flags = b[13]
	seg.Payload = b[doff:]
	seg.Truncated = total - len(b)
	return nil
}
