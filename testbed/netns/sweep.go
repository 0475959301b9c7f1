package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// StaleAge is how old a ts-* namespace whose name does not carry an owner pid
// must be before Sweep removes it.
const StaleAge = 10 * time.Minute

var (
	sweepMu  sync.Mutex
	nsNameRE = regexp.MustCompile(`^` + NamespacePrefix + `([0-9]+)x([0-9]+)-`)
)

// Sweep removes what crashed earlier runs left behind, and nothing that a
// live lab (in this or another process) still uses:
//
//   - a namespace ts-<pid>x<seq>-* is stale when process <pid> is gone (or a
//     zombie), or when <pid> now names a process that started after the
//     namespace was created (the pid was reused); its processes are killed
//     and it is deleted, which also removes its veths and its rules;
//   - a ts-* namespace whose name carries no pid is stale when older than
//     StaleAge.
//
// The harness adds rules only inside its namespaces, so they go with them.
//
// Labs of this process are never swept (their owner is alive). New calls
// Sweep; it returns the namespaces it removed.
func Sweep() ([]string, error) {
	sweepMu.Lock()
	defer sweepMu.Unlock()
	var removed []string
	var errs []error
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, NamespacePrefix) {
			continue
		}
		if stale, _ := staleNamespace(name); !stale {
			continue
		}
		if err := killNamespacePids(name); err != nil {
			errs = append(errs, err)
		}
		if err := deleteNamespace(name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// staleNamespace says whether namespace name belongs to a dead lab, and why.
func staleNamespace(name string) (bool, string) {
	fi, err := os.Stat(netnsDir + "/" + name)
	if err != nil {
		return false, "gone"
	}
	// The mtime of /run/netns/<name> is that of the nsfs inode, set when the
	// namespace was created.
	created := fi.ModTime()
	m := nsNameRE.FindStringSubmatch(name)
	if m == nil {
		if time.Since(created) > StaleAge {
			return true, fmt.Sprintf("no owner in the name and older than %v", StaleAge)
		}
		return false, "no owner in the name, recent"
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil {
		return false, "bad pid"
	}
	if pid == os.Getpid() {
		return false, "this process"
	}
	alive, start := procAlive(pid)
	if !alive {
		return true, fmt.Sprintf("owner pid %d is gone", pid)
	}
	if !start.IsZero() && start.After(created.Add(2*time.Second)) {
		return true, fmt.Sprintf("pid %d was reused (started %v, namespace created %v)", pid, start, created)
	}
	return false, "owner alive"
}

// procAlive reports whether pid is a live (non-zombie) process and, if it can
// tell, when it started.
func procAlive(pid int) (bool, time.Time) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, time.Time{}
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return true, time.Time{}
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return true, time.Time{}
	}
	if f[0] == "Z" || f[0] == "X" {
		return false, time.Time{}
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64) // field 22, starttime
	boot := bootTime()
	if err != nil || boot.IsZero() {
		return true, time.Time{}
	}
	const userHZ = 100 // USER_HZ is 100 on every Linux ABI Go supports
	return true, boot.Add(time.Duration(ticks) * time.Second / userHZ)
}

func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(n, 0)
			}
		}
	}
	return time.Time{}
}
