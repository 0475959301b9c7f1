// Package owner names the process that holds a perturbation, so that state
// left on the host (iptables rules, journal entries) can be told apart: a
// sweep removes what belongs to owners that are gone and leaves live ones
// alone. An owner is "p<pid>s<starttime>": the start time (clock ticks since
// boot, /proc/<pid>/stat field 22) tells a reused pid from the original.
package owner

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

var (
	selfOnce sync.Once
	self     string
	idRE     = regexp.MustCompile(`^p([0-9]+)s([0-9]+)`)
)

// Self is this process's owner id.
func Self() string {
	selfOnce.Do(func() {
		pid := os.Getpid()
		st, err := startTime(pid)
		if err != nil {
			// Without /proc the pid alone names us; Alive then trusts it.
			st = 0
		}
		self = fmt.Sprintf("p%ds%d", pid, st)
	})
	return self
}

// Parse finds the owner id at the start of s ("p12s34-rest" → "p12s34").
func Parse(s string) (id string, ok bool) {
	m := idRE.FindString(s)
	return m, m != ""
}

// Alive reports whether the owner named by id (as Self returns it) is a
// running process. A malformed id is not alive: state without an owner
// predates owners and is stale.
func Alive(id string) bool {
	m := idRE.FindStringSubmatch(id)
	if m == nil || m[0] != id {
		return false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil {
		return false
	}
	want, _ := strconv.ParseUint(m[2], 10, 64)
	st, err := startTime(pid)
	if err != nil {
		return false
	}
	// A zero start time means /proc was unreadable when the id was made.
	return want == 0 || st == want
}

// startTime reads field 22 of /proc/<pid>/stat; a zombie counts as gone.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("owner: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("owner: short /proc/%d/stat", pid)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("owner: process %d is a zombie", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
