package span

// Names is the string table a Span's names index: equal strings, equal ids,
// so that algorithms compare names as integers.
type Names struct {
	ids   map[string]int32
	names []string
}

// NewNames returns an empty table.
func NewNames() *Names { return &Names{ids: make(map[string]int32)} }

// ID interns s.
func (n *Names) ID(s string) int32 {
	if id, ok := n.ids[s]; ok {
		return id
	}
	id := int32(len(n.names))
	n.ids[s] = id
	n.names = append(n.names, s)
	return id
}

// Optional interns s, or returns -1 for "".
func (n *Names) Optional(s string) int32 {
	if s == "" {
		return -1
	}
	return n.ID(s)
}

// Lookup is s's id, -1 when s is not interned.
func (n *Names) Lookup(s string) int32 {
	if id, ok := n.ids[s]; ok {
		return id
	}
	return -1
}

// Name is the string of id, "" for -1.
func (n *Names) Name(id int32) string {
	if id < 0 {
		return ""
	}
	return n.names[id]
}

// Len is the number of names interned.
func (n *Names) Len() int { return len(n.names) }

// Reset empties the table, keeping its storage.
func (n *Names) Reset() {
	clear(n.ids)
	clear(n.names)
	n.names = n.names[:0]
}
