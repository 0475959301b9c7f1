package nfqdelay

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultProbeMark is the socket mark (SO_MARK) of probe packets when
// Options.ProbeMark is 0: the hook tells them from the link's packets by it.
const DefaultProbeMark = 0x74736370 // "tscp"

const probeLen = 24 // seq, send time (ns since t0), wave at send (ns)

// ProbeStats is what the probe stream measured: one-way delays, send(2) to
// recv(2), of packets that went through the same queue, reader, scheduler
// and wave as the link's. Unlike Stats' hook-to-verdict times they include
// the time a packet waits before the queue reader wakes and after the
// verdict, so On.Mean − Off.Mean is the change a receiver on this host saw.
type ProbeStats struct {
	Sent, Received int
	// On and Off split the received probes clear of an edge (both
	// neighbours saw the same wave value) by the wave's value when sent;
	// Mean and Std are of the one-way delay.
	On, Off PhaseStats
}

// probeStream is a Delayer's loopback probe stream.
type probeStream struct {
	t0     time.Time
	tx, rx *net.UDPConn
	spec   []string // its rule in OUTPUT
	added  bool
	sender sync.WaitGroup
	done   chan struct{} // closed when the receiver has returned

	// under Delayer.mu
	sent, received int
	on, off        phaseAcc
}

// startProbe opens the probe's sockets on 127.0.0.1 in the current network
// namespace and returns it with its rule spec; Start adds the rule.
func (d *Delayer) startProbe() (*probeStream, error) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("nfqdelay: probe: listen on 127.0.0.1 (is lo up in this namespace?): %w", err)
	}
	mark := d.opt.ProbeMark
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := dialer.Dial("udp4", rx.LocalAddr().String())
	if err != nil {
		_ = rx.Close()
		return nil, fmt.Errorf("nfqdelay: probe: dial %v with mark %#x: %w", rx.LocalAddr(), mark, err)
	}
	port := rx.LocalAddr().(*net.UDPAddr).Port
	p := &probeStream{
		t0: time.Now(), tx: conn.(*net.UDPConn), rx: rx, done: make(chan struct{}),
		spec: []string{"-o", "lo", "-p", "udp", "-s", "127.0.0.1/32", "-d", "127.0.0.1/32",
			"--dport", strconv.Itoa(port), "-m", "mark", "--mark", strconv.FormatUint(uint64(mark), 10),
			"-m", "comment", "--comment", d.tag,
			"-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(d.opt.Queue)), "--queue-bypass"},
	}
	return p, nil
}

// sendProbes sends a probe every Options.Probe until Stop, each stamped
// with its send time and the wave's value then.
func (d *Delayer) sendProbes() {
	p := d.probe
	defer p.sender.Done()
	buf := make([]byte, probeLen)
	t := time.NewTicker(d.opt.Probe)
	defer t.Stop()
	for seq := uint64(0); ; seq++ {
		select {
		case <-d.stopCh:
			return
		case <-t.C:
		}
		now := time.Now()
		binary.BigEndian.PutUint64(buf, seq)
		binary.BigEndian.PutUint64(buf[8:], uint64(now.Sub(p.t0)))
		binary.BigEndian.PutUint64(buf[16:], uint64(d.opt.Delay(now)))
		if _, err := p.tx.Write(buf); err != nil {
			d.noteErr(fmt.Errorf("nfqdelay: probe send: %w", err))
			continue
		}
		d.mu.Lock()
		p.sent++
		d.mu.Unlock()
	}
}

// receiveProbes reads probes until the socket is closed. It is an ordinary
// goroutine, as an application's receiver is. A probe is counted only when
// the probes sent just before and after it saw the same wave value: one that
// straddles an edge may have been delayed by the other phase (the hook reads
// the wave a little after the send, and the first packets after a falling
// edge are held behind the last of the on-phase), so it measures neither.
func (d *Delayer) receiveProbes() {
	p := d.probe
	defer close(p.done)
	type sample struct {
		seq       uint64
		owd, wave time.Duration
	}
	var window [3]sample // the last three received, oldest first
	have := 0
	buf := make([]byte, 64)
	for {
		n, err := p.rx.Read(buf)
		if err != nil {
			return
		}
		if n != probeLen {
			continue
		}
		cur := sample{
			seq:  binary.BigEndian.Uint64(buf),
			owd:  time.Since(p.t0) - time.Duration(binary.BigEndian.Uint64(buf[8:])),
			wave: time.Duration(binary.BigEndian.Uint64(buf[16:])),
		}
		window[0], window[1], window[2] = window[1], window[2], cur
		have++
		d.mu.Lock()
		p.received++
		if mid := window[1]; have >= 3 && window[0].seq+1 == mid.seq && mid.seq+1 == cur.seq &&
			window[0].wave == mid.wave && cur.wave == mid.wave {
			if mid.wave > 0 {
				p.on.add(mid.owd, d.requested(mid.wave))
			} else {
				p.off.add(mid.owd, d.requested(mid.wave))
			}
		}
		d.mu.Unlock()
	}
}

// stop closes the probe's sockets once the sender has stopped (Stop closed
// stopCh) and the packets released by the flush have had stopGrace to arrive.
func (p *probeStream) stop() {
	p.sender.Wait()
	_ = p.tx.Close()
	_ = p.rx.SetReadDeadline(time.Now().Add(stopGrace))
	<-p.done
	_ = p.rx.Close()
}
