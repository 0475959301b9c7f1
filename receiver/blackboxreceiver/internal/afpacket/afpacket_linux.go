// Package afpacket captures packets with an AF_PACKET socket (SOCK_DGRAM, so
// packets start at their network header on every kind of interface), a
// classic BPF filter attached before the socket is bound, a TPACKET_V3
// memory-mapped receive ring (or recvmsg(2) with SO_TIMESTAMPNS), kernel
// receive timestamps and the kernel's drop counters (PACKET_STATISTICS). No
// cgo, no libpcap.
package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Config configures a capture handle.
type Config struct {
	// Interface to capture on; "" or "any" captures on every interface of the
	// network namespace the handle is opened in.
	Interface string
	// Snaplen bounds the bytes read per packet (the filter also truncates).
	Snaplen int
	// BufferSize is the socket receive buffer (SO_RCVBUFFORCE), in bytes.
	BufferSize int
	// Filter is attached before bind, so no unfiltered packet is queued.
	Filter []bpf.RawInstruction
	// Timeout bounds a Read that sees no packet.
	Timeout time.Duration
	// NoRing reads with recvmsg(2), one system call per packet, instead of a
	// TPACKET_V3 ring (BufferSize is then the socket's receive buffer).
	NoRing bool
}

// ErrTimeout is returned by Read when no packet came within Config.Timeout.
var ErrTimeout = errors.New("afpacket: timeout")

// Handle is an open capture socket. Read is not safe for concurrent use.
type Handle struct {
	fd        int
	buf, oob  []byte
	loopbacks map[int]bool
	packets   uint64
	drops     uint64
	// The TPACKET_V3 ring, when the kernel gave one; else recvmsg(2).
	ring    *ring
	timeout int
	// One recvmsg(2) header, reused: reading a packet allocates nothing.
	msg  unix.Msghdr
	iov  unix.Iovec
	from unix.RawSockaddrLinklayer
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Open opens a capture socket in the calling thread's network namespace.
func Open(cfg Config) (*Handle, error) {
	if cfg.Snaplen <= 0 {
		cfg.Snaplen = 256 << 10
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	ifindex := 0
	loopbacks := map[int]bool{}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("afpacket: listing interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			loopbacks[i.Index] = true
		}
	}
	if cfg.Interface != "" && cfg.Interface != "any" {
		i, err := net.InterfaceByName(cfg.Interface)
		if err != nil {
			return nil, fmt.Errorf("afpacket: interface %q: %w", cfg.Interface, err)
		}
		ifindex = i.Index
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("afpacket: socket (needs CAP_NET_RAW): %w", err)
	}
	h := &Handle{fd: fd, buf: make([]byte, cfg.Snaplen), oob: make([]byte, 64), loopbacks: loopbacks}
	h.iov.Base = &h.buf[0]
	h.iov.SetLen(len(h.buf))
	h.msg.Name = (*byte)(unsafe.Pointer(&h.from))
	h.msg.Iov = &h.iov
	h.msg.Iovlen = 1
	h.msg.Control = &h.oob[0]
	fail := func(what string, err error) (*Handle, error) {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("afpacket: %s: %w", what, err)
	}
	if len(cfg.Filter) > 0 {
		filter := make([]unix.SockFilter, len(cfg.Filter))
		for i, ins := range cfg.Filter {
			filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
		}
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			return fail("attaching the filter", err)
		}
	}
	if cfg.BufferSize > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.BufferSize); err != nil {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.BufferSize); err != nil {
				return fail("receive buffer", err)
			}
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("timestamps", err)
	}
	tv := unix.NsecToTimeval(cfg.Timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("receive timeout", err)
	}
	h.timeout = int(cfg.Timeout.Milliseconds())
	if !cfg.NoRing {
		// The ring replaces the socket queue: its size is the buffer's.
		r, err := setupRing(fd, max(cfg.BufferSize, 4<<20), cfg.Snaplen)
		if err != nil {
			return fail("receive ring", err)
		}
		r.loopbacks = loopbacks
		h.ring = r
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		if h.ring != nil {
			_ = h.ring.close()
		}
		return fail("bind", err)
	}
	// Read the drop counter once, so that it counts from here.
	_, _ = unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	return h, nil
}

// Read returns the next packet (from its network header; valid until the next
// Read), its kernel receive time in nanoseconds, and the number of bytes of the
// packet that were cut off by the snap length.
func (h *Handle) Read() (pkt []byte, ts int64, cut int, err error) {
	if h.ring != nil {
		for attempt := 0; ; attempt++ {
			if pkt, ts, cut, ok := h.ring.read(); ok {
				return pkt, ts, cut, nil
			}
			if attempt > 0 {
				return nil, 0, 0, ErrTimeout
			}
			fds := []unix.PollFd{{Fd: int32(h.fd), Events: unix.POLLIN | unix.POLLERR}}
			if _, err := unix.Poll(fds, h.timeout); err != nil && err != unix.EINTR {
				return nil, 0, 0, err
			}
		}
	}
	for {
		h.msg.Namelen = uint32(unsafe.Sizeof(h.from))
		h.msg.SetControllen(len(h.oob))
		h.msg.Flags = 0
		r, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(h.fd), uintptr(unsafe.Pointer(&h.msg)), unix.MSG_TRUNC)
		if errno != 0 {
			if errno == unix.EAGAIN || errno == unix.EINTR {
				return nil, 0, 0, ErrTimeout
			}
			return nil, 0, 0, errno
		}
		n := int(r)
		// On a loopback interface every packet is seen leaving and arriving:
		// keep the arrival.
		if h.from.Pkttype == unix.PACKET_OUTGOING && h.loopbacks[int(h.from.Ifindex)] {
			continue
		}
		ts = timestamp(h.oob[:h.msg.Controllen])
		if ts == 0 {
			ts = time.Now().UnixNano()
		}
		if n > len(h.buf) {
			return h.buf, ts, n - len(h.buf), nil
		}
		return h.buf[:n], ts, 0, nil
	}
}

// timestamp finds SCM_TIMESTAMPNS in a control message buffer.
func timestamp(oob []byte) int64 {
	const hdr = int(unsafe.Sizeof(unix.Cmsghdr{}))
	for len(oob) >= hdr {
		l := int(binary.NativeEndian.Uint64(oob[0:8]))
		level := int32(binary.NativeEndian.Uint32(oob[8:12]))
		typ := int32(binary.NativeEndian.Uint32(oob[12:16]))
		if l < hdr || l > len(oob) {
			return 0
		}
		if level == unix.SOL_SOCKET && typ == unix.SCM_TIMESTAMPNS && l >= hdr+16 {
			sec := int64(binary.NativeEndian.Uint64(oob[hdr : hdr+8]))
			nsec := int64(binary.NativeEndian.Uint64(oob[hdr+8 : hdr+16]))
			return sec*1e9 + nsec
		}
		next := (l + 7) &^ 7
		if next > len(oob) {
			return 0
		}
		oob = oob[next:]
	}
	return 0
}

// Stats returns the packets the socket has received (after the filter) and
// dropped (its queue was full) since Open.
func (h *Handle) Stats() (packets, drops uint64, err error) {
	if h.ring != nil {
		st, err := unix.GetsockoptTpacketStatsV3(h.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			return h.packets, h.drops, err
		}
		h.packets += uint64(st.Packets)
		h.drops += uint64(st.Drops)
		return h.packets, h.drops, nil
	}
	st, err := unix.GetsockoptTpacketStats(h.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return h.packets, h.drops, err
	}
	// The kernel resets the counters on every read.
	h.packets += uint64(st.Packets)
	h.drops += uint64(st.Drops)
	return h.packets, h.drops, nil
}

// Close closes the socket.
func (h *Handle) Close() error {
	if h.ring != nil {
		_ = h.ring.close()
	}
	return unix.Close(h.fd)
}
