package injector

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/tierscope/tierscope/injector/internal/metadata"

	"github.com/tierscope/tierscope/internal/owner"
)

// TestJournalRecordsBeforeChangeAndClearsAfter: a capacity and a cpufreq
// lease each have a synced entry while they run, holding the original
// values, and none once restored.
func TestJournalRecordsBeforeChangeAndClearsAfter(t *testing.T) {
	e := start(t, nil)
	dir := e.inj.cfg.StateDir
	code, body := e.do("POST", "/v1/leases", `{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.5,"period":"1s"},"duration":"10s"}`)
	require.Equal(t, http.StatusCreated, code, body)
	capID := body["id"].(string)
	code, body = e.do("POST", "/v1/leases", `{"kind":"cpufreq","target":{"cpus":[0,1]},"wave":{"amplitude":100000,"period":"1s"},"duration":"10s"}`)
	require.Equal(t, http.StatusCreated, code, body)
	freqID := body["id"].(string)

	entries := func() map[string]journalEntry {
		out := map[string]journalEntry{}
		names, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(dir, n.Name()))
			require.NoError(t, err)
			var je journalEntry
			require.NoError(t, json.Unmarshal(b, &je), n.Name())
			out[je.Lease] = je
		}
		return out
	}
	got := entries()
	require.Len(t, got, 2)
	require.Equal(t, owner.Self(), got[capID].Owner)
	require.Equal(t, int64(-1), got[capID].Cgroup.Quota, "cpu.max was max")
	require.Len(t, got[freqID].CPUs, 2)
	require.Equal(t, "ondemand", got[freqID].CPUs[0].Governor)

	for _, id := range []string{capID, freqID} {
		code, _ = e.do("DELETE", "/v1/leases/"+id, "")
		require.Equal(t, http.StatusOK, code)
	}
	require.Empty(t, entries(), "restored leases leave no entry")
}

// TestJournalRestoresDeadOwners: at start, entries of a dead owner are
// restored and removed; a live owner's stay, and so does an entry that
// cannot be read.
func TestJournalRestoresDeadOwners(t *testing.T) {
	root := fakeCgroup(t, "tierscope.slice/app")
	cpuMax := filepath.Join(root, "tierscope.slice/app/cpu.max")
	sysfs := fakeSysfs(t, 1)
	gov := filepath.Join(sysfs, "cpu0/cpufreq/scaling_governor")
	// What a killed injector leaves: the cgroup throttled, the CPU on
	// userspace, and their original values in its journal.
	require.NoError(t, os.WriteFile(cpuMax, []byte("20000 100000"), 0o644))
	require.NoError(t, os.WriteFile(gov, []byte("userspace"), 0o644))
	dir := t.TempDir()
	dead := "p999999999s1" // no such pid
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	write(dead+"-a.json", `{"owner":"`+dead+`","lease":"a","cgroup":{"dir":"`+filepath.Dir(cpuMax)+`","version":2,"quota_us":50000,"period_us":100000}}`)
	write(dead+"-b.json", `{"owner":"`+dead+`","lease":"b","cpus":[{"cpu":0,"dir":"`+filepath.Dir(gov)+`","governor":"ondemand","base_khz":2000000}]}`)
	write(dead+"-c.json", `{"owner":"`+dead+`","lease":"c","cgroup":{"dir":"/nonexistent/cgroup","version":1,"quota_us":-1,"period_us":100000}}`)
	write(owner.Self()+"-live.json", `{"owner":"`+owner.Self()+`","lease":"live"}`)
	write(dead+"-torn.json", `{"owner":`)

	// An entry that cannot be read stops the start, naming it: restoring
	// is for an operator then. The others are restored all the same.
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint, cfg.Insecure, cfg.StateDir = "127.0.0.1:0", true, dir
	inj := newInjector(extensiontest.NewNopSettings(metadata.Type), cfg)
	err := inj.Start(context.Background(), testHost{})
	require.ErrorContains(t, err, dead+"-torn.json")
	require.Equal(t, "50000 100000", readFile(t, cpuMax))
	require.Equal(t, "ondemand", readFile(t, gov))
	var left []string
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		left = append(left, n.Name())
	}
	require.ElementsMatch(t, []string{owner.Self() + "-live.json", dead + "-torn.json"}, left)

	require.NoError(t, os.Remove(filepath.Join(dir, dead+"-torn.json")))
	start(t, func(c *Config) { c.StateDir = dir })
}
