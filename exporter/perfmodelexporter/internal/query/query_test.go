package query

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A scan that read the store before a reset (the warm-up racing a flush of
// late traces) must not put its stale result back after it.
// TestUnansweredCallsNamedByLearnedAddress flushes into a settled window,
// which resets the cache by itself.
func TestBlockCacheDropsScansOlderThanAReset(t *testing.T) {
	c := newBlockCache()
	k := blockKey{"graph.edge", 0, 60}
	gen := c.generation()
	c.reset()
	c.put(k, Stats{}, gen)
	_, ok := c.get(k)
	require.False(t, ok, "a scan from before the reset was cached")
	c.put(k, Stats{}, c.generation())
	_, ok = c.get(k)
	require.True(t, ok)
}
