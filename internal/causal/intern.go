package causal

import (
	"hash/maphash"
	"unsafe"
)

// internTable maps byte strings to dense indices into a []string table. Traces
// carry about one unique call id per call, so a trace of millions of messages
// interns millions of ids; a Go map with a string allocation per id spends most of
// a read in hashing, growth and garbage collection. This table keeps the
// strings' bytes in large append-only chunks and probes a flat slice, so an
// insertion costs one hash and no allocation of its own.
type internTable struct {
	seed  maphash.Seed
	slots []uint64 // 0 = empty; else high 32 bits of the hash | index into strs
	strs  *[]string
	used  int
	chunk []byte // the arena chunk being filled; its strings are never rewritten
}

// arenaChunk is the size of each block of interned bytes.
const arenaChunk = 1 << 20

func newInternTable(strs *[]string) *internTable {
	return &internTable{seed: maphash.MakeSeed(), slots: make([]uint64, 64), strs: strs}
}

// reserve sizes the table for about n strings.
func (t *internTable) reserve(n int) {
	for len(t.slots)*3 < (t.used+n)*4 {
		t.grow()
	}
}

// intern returns the index of b, adding it when new.
func (t *internTable) intern(b []byte) uint32 {
	h := maphash.Bytes(t.seed, b)
	tag := h >> 32 << 32
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			break
		}
		if s&^0xffffffff == tag && (*t.strs)[uint32(s)] == string(b) {
			return uint32(s)
		}
	}
	idx := uint32(len(*t.strs))
	*t.strs = append(*t.strs, t.store(b))
	t.insert(h, idx)
	if t.used*4 > len(t.slots)*3 {
		t.grow()
	}
	return idx
}

func (t *internTable) insert(h uint64, idx uint32) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = h>>32<<32 | uint64(idx)
	t.used++
}

func (t *internTable) grow() {
	old := t.slots
	t.slots = make([]uint64, 2*len(old))
	t.used = 0
	for _, s := range old {
		if s != 0 {
			t.insert(maphash.String(t.seed, (*t.strs)[uint32(s)]), uint32(s))
		}
	}
}

// store copies b into the arena and returns a string that shares its bytes. The
// bytes are never written again, which is what unsafe.String requires.
func (t *internTable) store(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > arenaChunk/16 {
		return string(b)
	}
	if cap(t.chunk)-len(t.chunk) < len(b) {
		t.chunk = make([]byte, 0, arenaChunk)
	}
	start := len(t.chunk)
	t.chunk = append(t.chunk, b...)
	return unsafe.String(&t.chunk[start], len(b))
}
