package span

import (
	"encoding/binary"
	"slices"
	"strings"
)

// Signature is the canonical signature of a path node (docs/formats.md §2): its
// name alone for a leaf, else its name followed by its children's signatures,
// sorted as byte strings, joined by "," in parentheses. children must already be
// sorted.
func Signature(name string, children []string) string {
	if len(children) == 0 {
		return name
	}
	n := len(name) + len(children) + 1
	for _, c := range children {
		n += len(c)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(name)
	b.WriteByte('(')
	for k, c := range children {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c)
	}
	b.WriteByte(')')
	return b.String()
}

// Tree is a forest of path nodes: the spans (or call pairs) of a path, each
// under its nearest ancestor that is a node. Label(i) indexes the name of node
// i; equal names under different labels still make equal signatures.
type Tree interface {
	Label(i int32) int32
	LabelName(l int32) string
	// Children appends i's children to dst in their own order (start time).
	Children(i int32, dst []int32) []int32
}

// Signer computes the canonical signatures of a Tree's subtrees and the
// canonical order of children (by signature, then in their own order), the one
// place where both are defined. Every subtree's signature is interned as a small
// integer (sid), keyed by its node's name and its children's sids in canonical
// order, so that a signature string is built once per distinct subtree shape,
// not once per node.
type Signer struct {
	t       Tree
	sids    []int32  // memoised subtree sid per node, -1 unknown
	sigs    []string // signature by sid
	canon   []int32  // canonical name id by label, -1 unknown
	names   map[string]int32
	sidOf   map[string]int32 // canonical name id and child sids → sid
	leafSid []int32          // by canonical name id, −1 unknown
	key     []byte
	kids    [][]int32 // per-depth scratch for children
}

// NewSigner returns a signer of t's nodes 0..size-1.
func NewSigner(t Tree, size int) *Signer {
	s := &Signer{names: make(map[string]int32), sidOf: make(map[string]int32)}
	s.Reset(t, size)
	return s
}

// Reset points the signer at a new tree of size nodes, keeping the subtree
// shapes it interned, so that signing many small trees (one trace after
// another) builds each distinct signature once.
func (s *Signer) Reset(t Tree, size int) {
	s.t = t
	if cap(s.sids) < size {
		s.sids = make([]int32, size)
	}
	s.sids = s.sids[:size]
	for i := range s.sids {
		s.sids[i] = -1
	}
	// Labels are the new tree's: Canonical refills the table as it grows.
	s.canon = s.canon[:0]
}

// Shapes is the number of distinct subtree signatures interned.
func (s *Signer) Shapes() int { return len(s.sigs) }

// Forget drops every interned shape, to bound the memory of a long-lived signer.
func (s *Signer) Forget() {
	s.sigs, s.leafSid, s.canon = s.sigs[:0], s.leafSid[:0], s.canon[:0]
	clear(s.names)
	clear(s.sidOf)
	for i := range s.sids {
		s.sids[i] = -1
	}
}

// Canonical returns the id of label l's name, equal for equal names.
func (s *Signer) Canonical(l int32) int32 {
	for int(l) >= len(s.canon) {
		s.canon = append(s.canon, -1)
	}
	if c := s.canon[l]; c >= 0 {
		return c
	}
	name := s.t.LabelName(l)
	c, ok := s.names[name]
	if !ok {
		c = int32(len(s.names))
		s.names[name] = c
	}
	s.canon[l] = c
	return c
}

// Signature is the canonical signature of i's subtree.
func (s *Signer) Signature(i int32) string { return s.sigs[s.SID(i)] }

// SignatureOf is the signature of a sid.
func (s *Signer) SignatureOf(sid int32) string { return s.sigs[sid] }

// SID computes (and memoises) the sid of i's subtree: equal sids, equal
// signatures.
func (s *Signer) SID(i int32) int32 { return s.sid(i, 0) }

// sid is SID; depth indexes the scratch.
func (s *Signer) sid(i int32, depth int) int32 {
	if v := s.sids[i]; v >= 0 {
		return v
	}
	kids := s.sortedChildren(i, depth)
	if len(kids) == 0 {
		// A leaf's sid depends on its name only: most nodes are leaves, and this
		// saves them the map.
		c := s.Canonical(s.t.Label(i))
		for int(c) >= len(s.leafSid) {
			s.leafSid = append(s.leafSid, -1)
		}
		if s.leafSid[c] < 0 {
			s.leafSid[c] = int32(len(s.sigs))
			s.sigs = append(s.sigs, s.t.LabelName(s.t.Label(i)))
		}
		s.sids[i] = s.leafSid[c]
		return s.sids[i]
	}
	// The key: the canonical name, then the children's sids in canonical order.
	// s.key is shared scratch, built only now that the children, and any
	// recursion, are done.
	s.key = binary.LittleEndian.AppendUint32(s.key[:0], uint32(s.Canonical(s.t.Label(i))))
	for _, c := range kids {
		s.key = binary.LittleEndian.AppendUint32(s.key, uint32(s.sids[c]))
	}
	v, ok := s.sidOf[string(s.key)]
	if !ok {
		v = int32(len(s.sigs))
		s.sidOf[string(s.key)] = v
		childSigs := make([]string, len(kids))
		for k, c := range kids {
			childSigs[k] = s.sigs[s.sids[c]]
		}
		s.sigs = append(s.sigs, Signature(s.t.LabelName(s.t.Label(i)), childSigs))
	}
	s.sids[i] = v
	return v
}

// SortedChildren returns i's children in canonical order, computing the sids
// of i's subtree as needed. The slice is the signer's scratch for depth: it is
// valid until the next call with the same depth.
func (s *Signer) SortedChildren(i int32, depth int) []int32 { return s.sortedChildren(i, depth) }

func (s *Signer) sortedChildren(i int32, depth int) []int32 {
	for _, c := range ChildrenAt(s.t, i, depth, &s.kids) {
		s.sid(c, depth+1)
	}
	return s.SortBySignature(s.kids[depth])
}

// ChildrenAt lists i's children into the scratch of depth in kids.
func ChildrenAt(t Tree, i int32, depth int, kids *[][]int32) []int32 {
	for len(*kids) <= depth {
		*kids = append(*kids, nil)
	}
	(*kids)[depth] = t.Children(i, (*kids)[depth][:0])
	return (*kids)[depth]
}

// SortBySignature sorts nodes whose sids are known into canonical order, in
// place: by signature, stably. It only reads the signer, so goroutines may
// call it at once. Insertion sort for the usual few children: equal sids
// compare equal without looking at their strings.
func (s *Signer) SortBySignature(kids []int32) []int32 {
	if len(kids) > 16 {
		slices.SortStableFunc(kids, func(x, y int32) int {
			if sx, sy := s.sids[x], s.sids[y]; sx != sy {
				return strings.Compare(s.sigs[sx], s.sigs[sy])
			}
			return 0
		})
		return kids
	}
	for k := 1; k < len(kids); k++ {
		for j := k; j > 0 && s.less(kids[j], kids[j-1]); j-- {
			kids[j], kids[j-1] = kids[j-1], kids[j]
		}
	}
	return kids
}

func (s *Signer) less(x, y int32) bool {
	sx, sy := s.sids[x], s.sids[y]
	return sx != sy && s.sigs[sx] < s.sigs[sy]
}
