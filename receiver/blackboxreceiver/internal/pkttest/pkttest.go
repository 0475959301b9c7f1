// Package pkttest builds IPv4/IPv6 TCP packets and whole TCP conversations for
// tests and benchmarks of the capture path.
package pkttest

import (
	"encoding/binary"
	"net/netip"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
)

// Packet returns an IP packet (IPv4 or IPv6 by the addresses) carrying a TCP
// segment. Checksums are left zero: the decoder does not check them.
func Packet(src, dst netip.AddrPort, seq, ack uint32, flags uint8, payload []byte) []byte {
	tcp := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(tcp[0:], src.Port())
	binary.BigEndian.PutUint16(tcp[2:], dst.Port())
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12] = 5 << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	copy(tcp[20:], payload)
	if src.Addr().Is4() {
		ip := make([]byte, 20, 20+len(tcp))
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(tcp)))
		ip[8] = 64
		ip[9] = 6
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		return append(ip, tcp...)
	}
	ip := make([]byte, 40, 40+len(tcp))
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(tcp)))
	ip[6] = 6
	ip[7] = 64
	s, d := src.Addr().As16(), dst.Addr().As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	return append(ip, tcp...)
}

// Conn writes the packets of one TCP connection, keeping sequence numbers.
type Conn struct {
	Client, Server netip.AddrPort
	cseq, sseq     uint32
	// MSS splits payloads into segments of at most this size (default 1448).
	MSS int
	out func(t int64, pkt []byte)
}

// NewConn starts a connection whose packets go to out.
func NewConn(client, server netip.AddrPort, out func(t int64, pkt []byte)) *Conn {
	return &Conn{Client: client, Server: server, cseq: 1000, sseq: 5000, MSS: 1448, out: out}
}

// Handshake sends SYN, SYN/ACK and ACK at t.
func (c *Conn) Handshake(t int64) {
	c.out(t, Packet(c.Client, c.Server, c.cseq, 0, packet.FlagSYN, nil))
	c.out(t, Packet(c.Server, c.Client, c.sseq, c.cseq+1, packet.FlagSYN|packet.FlagACK, nil))
	c.cseq++
	c.sseq++
	c.out(t, Packet(c.Client, c.Server, c.cseq, c.sseq, packet.FlagACK, nil))
}

// Send sends payload from the client (fromClient) or the server at t, in
// segments of MSS, each acknowledging everything the peer sent. The segments
// listed in drop (by index) are lost: their sequence space is used, but they
// are not sent.
func (c *Conn) Send(t int64, fromClient bool, payload []byte, drop ...int) {
	src, dst, seq, ack := c.Client, c.Server, &c.cseq, c.sseq
	if !fromClient {
		src, dst, seq, ack = c.Server, c.Client, &c.sseq, c.cseq
	}
	for i := 0; len(payload) > 0; i++ {
		n := min(len(payload), c.MSS)
		p := Packet(src, dst, *seq, ack, packet.FlagACK|packet.FlagPSH, payload[:n])
		*seq += uint32(n)
		payload = payload[n:]
		skip := false
		for _, d := range drop {
			skip = skip || d == i
		}
		if !skip {
			c.out(t, p)
		}
	}
}

// Ack sends a bare ACK from one side acknowledging everything the peer sent.
func (c *Conn) Ack(t int64, fromClient bool) {
	if fromClient {
		c.out(t, Packet(c.Client, c.Server, c.cseq, c.sseq, packet.FlagACK, nil))
	} else {
		c.out(t, Packet(c.Server, c.Client, c.sseq, c.cseq, packet.FlagACK, nil))
	}
}

// Close sends FIN from both sides and the last ACK.
func (c *Conn) Close(t int64) {
	c.out(t, Packet(c.Client, c.Server, c.cseq, c.sseq, packet.FlagFIN|packet.FlagACK, nil))
	c.cseq++
	c.out(t, Packet(c.Server, c.Client, c.sseq, c.cseq, packet.FlagFIN|packet.FlagACK, nil))
	c.sseq++
	c.out(t, Packet(c.Client, c.Server, c.cseq, c.sseq, packet.FlagACK, nil))
}
