package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Host is one network namespace of a lab.
type Host struct {
	lab  *Lab
	name string
	ns   string
	fd   int // open /run/netns/<ns>, for setns; -1 after Close
}

// Name is the host's short name, as given to Lab.Host.
func (h *Host) Name() string { return h.name }

// Namespace is the namespace's name, ts-<lab id>-<name>, as `ip netns` shows it.
func (h *Host) Namespace() string { return h.ns }

// Lab is the lab the host belongs to.
func (h *Host) Lab() *Lab { return h.lab }

func (h *Host) String() string { return h.ns }

// Command returns a command that runs name with args inside the namespace
// (through `ip netns exec`), in its own process group. Cancelling ctx kills
// the whole group, and so does Lab.Close if the command is still running. The
// caller starts and waits for it as usual; once the lab is closed, Start fails
// with ErrClosed.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	ip, err := lookPath("ip")
	if err != nil {
		ip = "ip"
	}
	cmd := exec.CommandContext(ctx, ip, append([]string{"netns", "exec", h.ns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return os.ErrProcessDone
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	l := h.lab
	l.mu.Lock()
	if l.closed {
		cmd.Err = ErrClosed
	} else {
		l.cmds = append(l.cmds, cmd)
	}
	l.mu.Unlock()
	return cmd
}

// errGoexit reports fn calling runtime.Goexit (t.FailNow, t.Skip) inside Run,
// where it would otherwise end a goroutine the test does not own.
var errGoexit = errors.New("netns: the function given to Host.Run called runtime.Goexit (t.FailNow/t.Fatal/t.Skip must not be called inside Run)")

// Run runs fn in the namespace: on a fresh goroutine locked to its OS thread,
// which setns(2)es into the namespace, runs fn, and setns(2)es back. Sockets
// created by fn stay in the namespace after Run returns, so a listener or a
// dialled connection can be used from any goroutine. Goroutines that fn starts
// do NOT run in the namespace. If the thread cannot be restored it is not
// unlocked, so the Go runtime discards it. A panic in fn is re-raised in the
// caller, with fn's stack.
func (h *Host) Run(fn func() error) error {
	// A private copy of the namespace fd, so that a concurrent Close cannot
	// pull it from under setns.
	h.lab.mu.Lock()
	if h.lab.closed || h.fd < 0 {
		h.lab.mu.Unlock()
		return ErrClosed
	}
	fd, err := unix.FcntlInt(uintptr(h.fd), unix.F_DUPFD_CLOEXEC, 0)
	h.lab.mu.Unlock()
	if err != nil {
		return fmt.Errorf("netns: dup namespace fd of %s: %w", h.ns, err)
	}
	defer unix.Close(fd)
	type result struct {
		err      error
		panicked bool
		value    any
		stack    []byte
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("netns: open this thread's namespace: %w", err)}
			return
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			_ = unix.Close(orig)
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("netns: setns into %s: %w", h.ns, err)}
			return
		}
		var res result
		returned := false
		defer func() {
			if err := unix.Setns(orig, unix.CLONE_NEWNET); err == nil {
				runtime.UnlockOSThread()
			} // else: stay locked; the runtime kills the thread when this goroutine ends
			_ = unix.Close(orig)
			ch <- res
		}()
		defer func() {
			if r := recover(); r != nil {
				res.panicked, res.value, res.stack = true, r, debug.Stack()
			} else if !returned {
				res.err = errGoexit
			}
		}()
		res.err = fn()
		returned = true
	}()
	res := <-ch
	if res.panicked {
		panic(fmt.Sprintf("%v\n\n[panic inside netns %s (Host.Run); its goroutine's stack:]\n%s", res.value, h.ns, res.stack))
	}
	return res.err
}

// Listen listens inside the namespace (see net.Listen). Lab.Close closes the
// listener if the caller has not.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := h.Run(func() (err error) {
		ln, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := h.lab.track(ln); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// ListenPacket is net.ListenPacket inside the namespace; Lab.Close closes it.
func (h *Host) ListenPacket(network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := h.Run(func() (err error) {
		pc, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := h.lab.track(pc); err != nil {
		_ = pc.Close()
		return nil, err
	}
	return pc, nil
}

// DialContext dials from inside the namespace (see net.Dialer.DialContext).
// The caller closes the connection.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := h.Run(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// HTTPClient returns an HTTP client whose connections are dialled inside the
// namespace (no proxy, keep-alive on). Lab.Close closes its idle connections.
func (h *Host) HTTPClient() *http.Client {
	tr := &http.Transport{
		DialContext:         h.DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	_ = h.lab.track(idleCloser{tr})
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

type idleCloser struct{ tr *http.Transport }

func (c idleCloser) Close() error { c.tr.CloseIdleConnections(); return nil }
