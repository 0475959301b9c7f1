// Package procnet reads the inventory of TCP connections from Linux's
// /proc/net/tcp and /proc/net/tcp6 and maps their sockets to processes through
// /proc/<pid>/fd, then folds them into communication links as paper 000 §3
// defines them: ⟨protocol, source node, source port, destination node,
// destination port⟩, a node being ⟨host IP, process id⟩, with an ephemeral
// port (the client's side, in the kernel's ip_local_port_range) replaced by 0,
// so that a link instantiated over and over is one record.
//
// The parsers are pure (they read from an io.Reader or an fs.FS).
package procnet

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// TCP states of /proc/net/tcp.
const (
	StateEstablished = 0x01
	StateListen      = 0x0A
)

// Socket is one line of /proc/net/tcp{,6}.
type Socket struct {
	Local, Remote netip.AddrPort
	State         int
	Inode         uint64
}

// MaxLines bounds the lines read from one table.
const MaxLines = 1 << 20

// ParseTCP parses a /proc/net/tcp or tcp6 table. Malformed lines are skipped
// and counted.
func ParseTCP(r io.Reader) (socks []Socket, malformed int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), 4096)
	first := true
	for n := 0; sc.Scan(); n++ {
		if n >= MaxLines {
			return socks, malformed, errors.New("procnet: table too long")
		}
		if first {
			first = false
			if strings.Contains(sc.Text(), "local_address") {
				continue
			}
		}
		s, ok := parseLine(sc.Text())
		if !ok {
			malformed++
			continue
		}
		socks = append(socks, s)
	}
	return socks, malformed, sc.Err()
}

func parseLine(line string) (Socket, bool) {
	f := strings.Fields(line)
	if len(f) < 10 {
		return Socket{}, false
	}
	local, ok1 := parseAddr(f[1])
	remote, ok2 := parseAddr(f[2])
	st, err := strconv.ParseUint(f[3], 16, 8)
	inode, err2 := strconv.ParseUint(f[9], 10, 64)
	if !ok1 || !ok2 || err != nil || err2 != nil {
		return Socket{}, false
	}
	return Socket{Local: local, Remote: remote, State: int(st), Inode: inode}, true
}

// parseAddr parses "0100007F:1F90" (IPv4) or a 32-digit IPv6 address: the
// kernel prints each 32-bit word in host byte order (little-endian here).
func parseAddr(s string) (netip.AddrPort, bool) {
	colon := strings.IndexByte(s, ':')
	if colon < 0 {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(s[:colon])
	port, err2 := strconv.ParseUint(s[colon+1:], 16, 16)
	if err != nil || err2 != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	var a netip.Addr
	if len(raw) == 4 {
		a = netip.AddrFrom4([4]byte(raw))
	} else {
		a = netip.AddrFrom16([16]byte(raw)).Unmap()
	}
	return netip.AddrPortFrom(a, uint16(port)), true
}

// Process is what the inventory knows of a process owning sockets.
type Process struct {
	PID  int
	Comm string
}

// SocketOwners maps socket inodes to their processes by reading the fd links
// of every process in procFS (a /proc). Processes that vanish or cannot be read
// are skipped. maxProcs bounds the processes examined.
func SocketOwners(procFS fs.FS, maxProcs int) (map[uint64]Process, error) {
	ents, err := fs.ReadDir(procFS, ".")
	if err != nil {
		return nil, err
	}
	owners := map[uint64]Process{}
	seen := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if seen++; maxProcs > 0 && seen > maxProcs {
			break
		}
		fds, err := fs.ReadDir(procFS, e.Name()+"/fd")
		if err != nil {
			continue
		}
		var comm string
		for _, fd := range fds {
			target, err := readLink(procFS, e.Name()+"/fd/"+fd.Name())
			if err != nil || !strings.HasPrefix(target, "socket:[") || !strings.HasSuffix(target, "]") {
				continue
			}
			inode, err := strconv.ParseUint(target[8:len(target)-1], 10, 64)
			if err != nil {
				continue
			}
			if comm == "" {
				b, _ := fs.ReadFile(procFS, e.Name()+"/comm")
				comm = strings.TrimSpace(string(b))
			}
			if _, ok := owners[inode]; !ok {
				owners[inode] = Process{PID: pid, Comm: comm}
			}
		}
	}
	return owners, nil
}

// ReadLinkFS is an fs.FS that can read symbolic links (os.DirFS can, from Go
// 1.25, through fs.ReadLinkFS).
func readLink(fsys fs.FS, name string) (string, error) {
	if rl, ok := fsys.(fs.ReadLinkFS); ok {
		return rl.ReadLink(name)
	}
	return "", fmt.Errorf("procnet: %T cannot read links", fsys)
}

// Link is one communication link, the key of the inventory.
type Link struct {
	Source, Destination       netip.AddrPort // ports 0 when ephemeral
	SourcePID, DestinationPID int            // 0 when unknown
	SourceComm, DestComm      string
}

// LinkCount is a link and the connections that instantiate it.
type LinkCount struct {
	Link
	Connections int
}

// PortRange is an inclusive range of ports.
type PortRange struct{ Lo, Hi uint16 }

// Contains reports whether p is in the range.
func (r PortRange) Contains(p uint16) bool { return p >= r.Lo && p <= r.Hi }

// ParsePortRange parses /proc/sys/net/ipv4/ip_local_port_range ("32768\t60999").
func ParsePortRange(s string) (PortRange, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return PortRange{}, fmt.Errorf("procnet: port range %q", s)
	}
	lo, err := strconv.ParseUint(f[0], 10, 16)
	hi, err2 := strconv.ParseUint(f[1], 10, 16)
	if err != nil || err2 != nil || lo > hi {
		return PortRange{}, fmt.Errorf("procnet: port range %q", s)
	}
	return PortRange{uint16(lo), uint16(hi)}, nil
}

// Links folds established connections into links. A connection's server side
// is the end whose port a local socket listens on (on its address or on the
// wildcard); otherwise the local end is taken as the client. The client's port
// is replaced by 0 when it is in ephemeral. A connection between two local
// processes appears twice in the tables and is counted once, with both pids.
func Links(socks []Socket, owners map[uint64]Process, ephemeral PortRange) []LinkCount {
	listening := map[netip.AddrPort]bool{}
	for _, s := range socks {
		if s.State == StateListen {
			listening[s.Local] = true
		}
	}
	isListening := func(a netip.AddrPort) bool {
		if listening[a] {
			return true
		}
		for _, any := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
			if listening[netip.AddrPortFrom(any, a.Port())] {
				return true
			}
		}
		return false
	}
	type connKey struct{ client, server netip.AddrPort }
	type conn struct {
		clientPID, serverPID   int
		clientComm, serverComm string
	}
	conns := map[connKey]*conn{}
	var order []connKey
	for _, s := range socks {
		if s.State != StateEstablished {
			continue
		}
		owner := owners[s.Inode]
		var k connKey
		localIsServer := isListening(s.Local)
		if localIsServer {
			k = connKey{client: s.Remote, server: s.Local}
		} else {
			k = connKey{client: s.Local, server: s.Remote}
		}
		c, ok := conns[k]
		if !ok {
			c = &conn{}
			conns[k] = c
			order = append(order, k)
		}
		if localIsServer {
			c.serverPID, c.serverComm = owner.PID, owner.Comm
		} else {
			c.clientPID, c.clientComm = owner.PID, owner.Comm
		}
	}
	agg := map[Link]int{}
	var links []Link
	for _, k := range order {
		c := conns[k]
		src := k.client
		if ephemeral.Contains(src.Port()) {
			src = netip.AddrPortFrom(src.Addr(), 0)
		}
		l := Link{Source: src, Destination: k.server, SourcePID: c.clientPID, DestinationPID: c.serverPID,
			SourceComm: c.clientComm, DestComm: c.serverComm}
		if _, ok := agg[l]; !ok {
			links = append(links, l)
		}
		agg[l]++
	}
	out := make([]LinkCount, len(links))
	for i, l := range links {
		out[i] = LinkCount{Link: l, Connections: agg[l]}
	}
	slices.SortFunc(out, func(a, b LinkCount) int {
		if c := a.Source.Compare(b.Source); c != 0 {
			return c
		}
		if c := a.Destination.Compare(b.Destination); c != 0 {
			return c
		}
		return a.SourcePID - b.SourcePID
	})
	return out
}
