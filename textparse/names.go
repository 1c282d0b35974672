package textparse

import "strings"

// nameSet is what SetNames precomputes.
type nameSet struct {
	names []string
	pats  []namePat
	// first is, by a member's first byte, 1 + the index in pats of the one short name
	// starting with it, several, or 0.
	first [256]uint8
	// lens says, by a name's first byte, the lengths of the names starting with it: bit l for
	// a length l < 31, bit 31 for any longer one. A name whose bit is clear is none of them.
	lens  [256]uint32
	unpat bool // a name lens cannot rule out (empty, or not plain): field must search
}

// several in nameSet.first: several short names start with this byte, and Next tries each
// pattern.
const several = 255

// namePat is `"name"` as the first bytes of a little-endian word, for names of up to six
// bytes: one masked compare finds the name without scanning it.
type namePat struct {
	w, mask uint64
	n       int // bytes: the name and its quotes
	field   int
}

// SetNames gives the names whose index Next reports in Field. Names of up to six bytes
// (the event decoder's ts, key, metric, value and count) are recognised by one masked
// compare of the eight bytes at the member's quote, so that the common member costs no name
// scan at all. A longer name is scanned and searched for, but only when a name given has the
// member's first byte and length: a member that none has (most unknown ones) costs no search,
// however long the names given are.
func (s *Scanner) SetNames(names ...string) {
	if len(names) == 0 {
		s.ns = nil
		return
	}
	ns := &nameSet{names: names}
	s.ns = ns
	for k, n := range names {
		if len(n) == 0 || strings.ContainsAny(n, "\"\\") || !isPlain(n) {
			ns.unpat = true
			continue
		}
		ns.lens[n[0]] |= 1 << min(len(n), 31)
		if len(n) > 6 || len(ns.pats) >= several-1 { // no pattern: scanned
			continue
		}
		var w uint64
		p := `"` + n + `"`
		for j := len(p) - 1; j >= 0; j-- {
			w = w<<8 | uint64(p[j])
		}
		ns.pats = append(ns.pats, namePat{w: w, mask: 1<<(8*len(p)) - 1, n: len(p), field: k})
		if c := n[0]; ns.first[c] == 0 {
			ns.first[c] = uint8(len(ns.pats))
		} else {
			ns.first[c] = several
		}
	}
}

// Into has Next also store each member's value in vals[Field], or in vals[len(vals)-1] for a
// name SetNames did not give, so that a caller keeping the last value of each name needs no
// copy of its own (a copy read back right after Next's store stalls the store buffer). vals
// needs one entry more than the names; nil stops it.
func (s *Scanner) Into(vals []Value) { s.vals = vals }

// keep stores v as the current value, and in Into's slot.
func (s *Scanner) keep(v Value) {
	s.Value = v
	if s.vals != nil {
		k := s.Field
		if k < 0 || k >= len(s.vals)-1 {
			k = len(s.vals) - 1
		}
		s.vals[k] = v
	}
}

// isPlain reports a name of printable ASCII, which a JSON string holds as it is.
func isPlain(n string) bool {
	for i := 0; i < len(n); i++ {
		if n[i] < 0x20 || n[i] >= 0x7f {
			return false
		}
	}
	return true
}

// field returns the index of the scanned name in s.names, or −1.
func (s *Scanner) field(b []byte) int {
	ns := s.ns
	if ns == nil {
		return -1
	}
	name := s.Name.Bytes(b)
	if !ns.unpat && !s.Name.Escaped && (len(name) == 0 || ns.lens[name[0]]&(1<<min(len(name), 31)) == 0) {
		return -1 // no name has this first byte and length: an unknown member
	}
	if s.Name.Escaped {
		s.scratch, _ = Unquote(s.scratch[:0], name)
		name = s.scratch
	}
	for k, n := range ns.names {
		if n == string(name) {
			return k
		}
	}
	return -1
}

// pattern returns the index in s.pats of the name whose pattern starts w, or −1.
func (ns *nameSet) pattern(w uint64) int {
	for j := range ns.pats {
		if p := &ns.pats[j]; w&p.mask == p.w {
			return j
		}
	}
	return -1
}
