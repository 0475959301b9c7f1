package injector

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/internal/owner"
)

// watchdogEnv, set to "<owner id>/<injector instance>", makes this binary
// run as the hang watchdog of that injector instead of starting (see init).
const watchdogEnv = "TIERSCOPE_INJECTOR_WATCHDOG"

// A process that hangs (SIGSTOP, a deadlock, a swapped-out host) keeps its
// NFQUEUE bound, so --queue-bypass never applies and every packet of a
// delayed link waits in the kernel: the link is black-holed. The watchdog is
// a second process, the same binary re-executed, that the injector feeds a
// heartbeat through a pipe while its delay schedulers keep up. Without a
// heartbeat for the bound it was last given it deletes the owner's rules, so
// packets pass undelayed; on the pipe's end (the injector died) it does the
// same and exits.
func init() {
	if v := os.Getenv(watchdogEnv); v != "" {
		ownerID, instance, _ := strings.Cut(v, "/")
		os.Exit(runWatchdog(v, os.Stdin, os.Stderr, func(string) (int, error) {
			return nfqdelay.SweepOwned(ownerID, instance+"-")
		}))
	}
}

// runWatchdog reads heartbeats (a bound in ns per line) from in.
func runWatchdog(id string, in io.Reader, log io.Writer, sweep func(string) (int, error)) int {
	beats := make(chan time.Duration)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if ns, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil && ns > 0 {
				beats <- time.Duration(ns)
			}
		}
		close(beats)
	}()
	failOpen := func(why string) {
		// A clean shutdown leaves nothing to delete, and nothing to say.
		if n, err := sweep(id); n > 0 || err != nil {
			fmt.Fprintf(log, "injector watchdog: %s: deleted %d NFQUEUE rules of %s (err: %v)\n", why, n, id, err)
		}
	}
	bound := defaultHangTimeout
	timer := time.NewTimer(bound)
	swept := false
	for {
		select {
		case b, ok := <-beats:
			if !ok {
				failOpen("the injector is gone")
				return 0
			}
			bound, swept = b, false
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(bound)
		case <-timer.C:
			// A watchdog that was itself starved of CPU wakes to a timer and
			// a beat at once: a beat waiting in the reader, or bytes in the
			// pipe, mean the injector is alive.
			select {
			case b, ok := <-beats:
				if ok {
					bound = b
					timer.Reset(bound)
					continue
				}
				failOpen("the injector is gone")
				return 0
			default:
			}
			if pending(in) {
				timer.Reset(bound)
				continue
			}
			if !swept {
				failOpen(fmt.Sprintf("no heartbeat for %v", bound))
				swept = true
			}
		}
	}
}

// pending reports whether in is a pipe with unread bytes.
func pending(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ) // FIONREAD: works on pipes
	return err == nil && n > 0
}

// minHangBound keeps a short wave's period from making the bound so tight
// that a loaded host's scheduling latency reads as a hang.
const minHangBound = 250 * time.Millisecond

// watchdog is the injector's side: the child process and its pipe.
type watchdog struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	pipe io.WriteCloser
	done chan struct{}
}

// startWatchdog re-executes this binary as the watchdog of the injector
// instance of this process.
func startWatchdog(instance string) (*watchdog, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("injector: watchdog: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), watchdogEnv+"="+owner.Self()+"/"+instance)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Its own process group: a stop or kill sent to the collector's group
	// (Ctrl-Z, a service manager) must not stop the watchdog with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("injector: watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("injector: watchdog: %w", err)
	}
	w := &watchdog{cmd: cmd, pipe: pipe, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	return w, nil
}

// beat tells the watchdog to wait up to bound for the next beat.
func (w *watchdog) beat(bound time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := fmt.Fprintf(w.pipe, "%d\n", bound.Nanoseconds())
	return err
}

// stop closes the pipe; the watchdog sweeps what is left and exits.
func (w *watchdog) stop() {
	w.mu.Lock()
	_ = w.pipe.Close()
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
	}
}

// heartbeat beats while every delay lease's scheduler keeps up, at a
// quarter of the bound: the least of hang_timeout and the active delay
// waves' periods.
func (i *injector) heartbeat(w *watchdog, stop <-chan struct{}) {
	wasHealthy := true
	for {
		bound, healthy := i.mgr.delayHealth(i.cfg.HangTimeout, time.Now())
		if healthy {
			if err := w.beat(bound); err != nil {
				i.set.Logger.Error("injector watchdog: heartbeat failed; a hang would no longer fail open", zap.Error(err))
				return
			}
		} else if wasHealthy {
			i.set.Logger.Error("injector: a delay scheduler is overdue; the watchdog will delete the rules", zap.Duration("bound", bound))
		}
		wasHealthy = healthy
		select {
		case <-stop:
			return
		case <-time.After(max(bound/4, 5*time.Millisecond)):
		}
	}
}

// delayHealth is the hang bound (the least of limit and the active delay
// waves' periods, but not under minHangBound unless limit is) and whether
// every delay lease releases its packets within it.
func (m *manager) delayHealth(limit time.Duration, now time.Time) (time.Duration, bool) {
	m.mu.Lock()
	var acts []*delayActuator
	bound := limit
	for _, l := range m.leases {
		l.mu.Lock()
		a, ok := l.act.(*delayActuator)
		if ok && l.state == stateActive {
			acts = append(acts, a)
			bound = min(bound, l.req.w.Period)
		}
		l.mu.Unlock()
	}
	m.mu.Unlock()
	bound = max(bound, min(limit, minHangBound))
	for _, a := range acts {
		if a.d.Overdue(now) > bound {
			return bound, false
		}
	}
	return bound, true
}
