package injector

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tierscope/tierscope/injector/internal/cgroupcpu"
	"github.com/tierscope/tierscope/injector/internal/cpufreq"
	"github.com/tierscope/tierscope/internal/owner"
)

// journal keeps, on disk and synced, the original value of every quota and
// frequency a lease is about to change, so that a process killed mid-lease
// (kill -9, OOM, power) cannot leave the host throttled: the next start
// restores what the dead owner's entries record, then clears them.
type journal struct {
	dir string
}

// journalEntry is one lease's saved state, in <dir>/<owner>-<lease>.json.
type journalEntry struct {
	Owner  string           `json:"owner"`
	Lease  string           `json:"lease"`
	Cgroup *cgroupcpu.Saved `json:"cgroup,omitempty"`
	CPUs   []cpufreq.Saved  `json:"cpus,omitempty"`
}

const journalExt = ".json"

func (j *journal) path(lease string) string {
	return filepath.Join(j.dir, owner.Self()+"-"+lease+journalExt)
}

// record writes e durably: a temporary file, fsync, rename, fsync of the
// directory. Only then may the backend change anything.
func (j *journal) record(e journalEntry) error {
	e.Owner = owner.Self()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	final := j.path(e.Lease)
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("journal: writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal: syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return j.syncDir()
}

// clear removes a lease's entry once its backend is restored.
func (j *journal) clear(lease string) error {
	if err := os.Remove(j.path(lease)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	return j.syncDir()
}

func (j *journal) syncDir() error {
	d, err := os.Open(j.dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: syncing %s: %w", j.dir, err)
	}
	return nil
}

// restoreStale restores every entry whose owner is gone and removes it; the
// entries of live injectors (another process sharing the directory) stay.
// An entry whose target no longer exists is dropped. It returns how many
// entries it restored; a failed restore keeps its entry for the next start.
func (j *journal) restoreStale() (int, error) {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	names, err := os.ReadDir(j.dir)
	if err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	var errs []error
	n := 0
	for _, de := range names {
		name := de.Name()
		p := filepath.Join(j.dir, name)
		if strings.HasSuffix(name, journalExt+".tmp") {
			if id, ok := owner.Parse(name); !ok || !owner.Alive(id) {
				_ = os.Remove(p) // never renamed: nothing was changed after it
			}
			continue
		}
		if !strings.HasSuffix(name, journalExt) {
			continue
		}
		if id, ok := owner.Parse(name); ok && owner.Alive(id) {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("journal: %w", err))
			continue
		}
		var e journalEntry
		if err := json.Unmarshal(b, &e); err != nil {
			errs = append(errs, fmt.Errorf("journal: %s: %w (left in place)", p, err))
			continue
		}
		var rerrs []error
		if e.Cgroup != nil {
			rerrs = append(rerrs, ignoreGone(cgroupcpu.RestoreSaved(*e.Cgroup)))
		}
		for _, c := range e.CPUs {
			rerrs = append(rerrs, ignoreGone(cpufreq.RestoreSaved(c)))
		}
		if err := errors.Join(rerrs...); err != nil {
			errs = append(errs, fmt.Errorf("journal: restoring %s: %w (kept for the next start)", p, err))
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("journal: %w", err))
			continue
		}
		n++
	}
	if n > 0 {
		errs = append(errs, j.syncDir())
	}
	return n, errors.Join(errs...)
}

// ignoreGone drops the error of a target that no longer exists: a removed
// cgroup has no quota left to restore.
func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// journaled clears its lease's entry once the backend is restored.
type journaled struct {
	actuator
	j     *journal
	lease string
}

func (a journaled) Restore() error {
	if err := a.actuator.Restore(); err != nil {
		return err
	}
	return a.j.clear(a.lease)
}
