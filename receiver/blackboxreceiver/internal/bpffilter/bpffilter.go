// Package bpffilter compiles the capture filter: a classic BPF program,
// assembled by hand with golang.org/x/net/bpf, that keeps TCP packets to or
// from the given ports and hosts. The program reads packets from their IP
// header on, as an AF_PACKET SOCK_DGRAM socket presents them to the kernel's
// filter; it accepts IPv4 (first fragments only) and IPv6 whose next header is
// TCP (extension headers are not followed). Port and host sets are each
// optional; a packet must match both.
package bpffilter

import (
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"
)

// MaxTerms bounds ports plus hosts, far below the kernel's 4096 instructions
const MaxTerms = 128

// op is an instruction, a label, or a jump whose targets are labels.
type op struct {
	ins    bpf.Instruction
	label  string
	jump   bool
	always bool // unconditional jump to jt
	cond   bpf.JumpTest
	val    uint32
	jt, jf string // "" = the next instruction
}

type prog struct{ ops []op }

func (p *prog) add(ins bpf.Instruction) { p.ops = append(p.ops, op{ins: ins}) }
func (p *prog) label(l string)          { p.ops = append(p.ops, op{label: l}) }
func (p *prog) goTo(l string)           { p.ops = append(p.ops, op{jump: true, always: true, jt: l}) }
func (p *prog) jumpIf(c bpf.JumpTest, v uint32, jt, jf string) {
	p.ops = append(p.ops, op{jump: true, cond: c, val: v, jt: jt, jf: jf})
}

func (p *prog) assemble() ([]bpf.RawInstruction, error) {
	pos := map[string]int{}
	var real []op
	for _, o := range p.ops {
		if o.label != "" {
			pos[o.label] = len(real)
			continue
		}
		real = append(real, o)
	}
	out := make([]bpf.Instruction, len(real))
	for i, o := range real {
		if !o.jump {
			out[i] = o.ins
			continue
		}
		off := func(l string) (int, error) {
			if l == "" {
				return 0, nil
			}
			t, ok := pos[l]
			if !ok {
				return 0, fmt.Errorf("bpffilter: unknown label %q", l)
			}
			return t - i - 1, nil
		}
		jt, err := off(o.jt)
		if err != nil {
			return nil, err
		}
		if o.always {
			out[i] = bpf.Jump{Skip: uint32(jt)}
			continue
		}
		jf, err := off(o.jf)
		if err != nil {
			return nil, err
		}
		if jt < 0 || jt > 255 || jf < 0 || jf > 255 {
			return nil, fmt.Errorf("bpffilter: jump out of range (%d, %d)", jt, jf)
		}
		out[i] = bpf.JumpIf{Cond: o.cond, Val: o.val, SkipTrue: uint8(jt), SkipFalse: uint8(jf)}
	}
	return bpf.Assemble(out)
}

func word(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// Compile returns the filter keeping TCP packets whose source or destination
// port is in ports (any port when empty) and whose source or destination
// address is in hosts (any host when empty), truncated to snaplen bytes
// (0: 256 KiB).
func Compile(ports []uint16, hosts []netip.Addr, snaplen uint32) ([]bpf.RawInstruction, error) {
	if len(ports)+len(hosts) > MaxTerms {
		return nil, fmt.Errorf("bpffilter: %d ports and hosts, at most %d", len(ports)+len(hosts), MaxTerms)
	}
	if snaplen == 0 {
		snaplen = 256 << 10
	}
	var v4, v6 []netip.Addr
	for _, h := range hosts {
		if h = h.Unmap(); h.Is4() {
			v4 = append(v4, h)
		} else {
			v6 = append(v6, h)
		}
	}
	c := &compiler{ports: ports}
	p := &c.p
	p.add(bpf.LoadAbsolute{Off: 0, Size: 1})
	p.add(bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4})
	c.goToIf(bpf.JumpEqual, 6, "v6")
	c.require(bpf.JumpEqual, 4)
	c.ipv4(v4, len(hosts) > 0)
	c.ipv6(v6, len(hosts) > 0)
	p.label("accept")
	p.add(bpf.RetConstant{Val: snaplen})
	p.label("drop")
	p.add(bpf.RetConstant{Val: 0})
	return p.assemble()
}

// compiler builds Compile's program. Every conditional jump is local (it
// skips at most one instruction), so that no list of ports or hosts can push
// a target out of a jump's reach; far targets are reached by unconditional
// jumps.
type compiler struct {
	p     prog
	n     int // local labels made so far
	ports []uint16
}

// local returns a new label for a jump within a few instructions.
func (c *compiler) local() string { c.n++; return fmt.Sprintf("l%d", c.n) }

// require goes on if the test of A against v is true, else drops the packet.
func (c *compiler) require(cond bpf.JumpTest, v uint32) {
	ok := c.local()
	c.p.jumpIf(cond, v, ok, "")
	c.p.goTo("drop")
	c.p.label(ok)
}

// goToIf jumps to target if the test of A against v is true, else goes on.
func (c *compiler) goToIf(cond bpf.JumpTest, v uint32, target string) {
	no := c.local()
	c.p.jumpIf(cond, v, "", no)
	c.p.goTo(target)
	c.p.label(no)
}

// portChecks compares the 16-bit ports at X+0 and X+2 with the list: on a
// match it goes to next, else it drops the packet.
func (c *compiler) portChecks(next string) {
	for _, off := range []uint32{0, 2} {
		c.p.add(bpf.LoadIndirect{Off: off, Size: 2})
		for _, port := range c.ports {
			c.goToIf(bpf.JumpEqual, uint32(port), next)
		}
	}
	c.p.goTo("drop")
}

// ipv4 checks an IPv4 packet: protocol TCP, not a later fragment, then
// the ports (X = header length) and, when filtering hosts, the addresses
// against v4; it ends by going to accept or drop.
func (c *compiler) ipv4(v4 []netip.Addr, filterHosts bool) {
	p := &c.p
	p.add(bpf.LoadAbsolute{Off: 9, Size: 1})
	c.require(bpf.JumpEqual, 6)
	p.add(bpf.LoadAbsolute{Off: 6, Size: 2})
	p.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0x1fff})
	c.require(bpf.JumpEqual, 0)
	if len(c.ports) > 0 {
		p.add(bpf.LoadMemShift{Off: 0})
		c.portChecks("v4hosts")
	}
	p.label("v4hosts")
	if filterHosts {
		for _, off := range []uint32{12, 16} {
			p.add(bpf.LoadAbsolute{Off: off, Size: 4})
			for _, h := range v4 {
				a := h.As4()
				c.goToIf(bpf.JumpEqual, word(a[:]), "accept")
			}
		}
		p.goTo("drop")
	} else {
		p.goTo("accept")
	}
}

// ipv6 checks an IPv6 packet (label v6): next header TCP, then the ports at
// 40 and, when filtering hosts, the addresses against v6, each compared
// word by word; without hosts it falls through to accept.
func (c *compiler) ipv6(v6 []netip.Addr, filterHosts bool) {
	p := &c.p
	p.label("v6")
	p.add(bpf.LoadAbsolute{Off: 6, Size: 1})
	c.require(bpf.JumpEqual, 6)
	if len(c.ports) > 0 {
		p.add(bpf.LoadConstant{Dst: bpf.RegX, Val: 40})
		c.portChecks("v6hosts")
	}
	p.label("v6hosts")
	if filterHosts {
		for _, off := range []uint32{8, 24} {
			for _, h := range v6 {
				a := h.As16()
				miss := c.local()
				for w := range 4 {
					p.add(bpf.LoadAbsolute{Off: off + uint32(4*w), Size: 4})
					ok := c.local()
					p.jumpIf(bpf.JumpEqual, word(a[4*w:]), ok, "")
					p.goTo(miss)
					p.label(ok)
				}
				p.goTo("accept")
				p.label(miss)
			}
		}
		p.goTo("drop")
	}
}
