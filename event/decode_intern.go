package event

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// internTable is the decoder's bounded table of key, metric and series strings (a series
// string holds 0xFF, which no valid name does, so the two never meet): an open-addressing
// table with linear probing, at most half full, hashed once per lookup (lookup returns the
// hash that add then reuses). It replaced a map[string]string, whose lookup cost a third of
// an event's decoding. A short name (up to 16 bytes, the common key) is held and compared as
// two words and its length, the words the fast path read anyway (textparse.PlainName), and
// hashed by one 64×64→128-bit multiply of them with a random per-table key; a longer name
// is hashed by hash/maphash and compared as a string. Names come from producers, so the
// table bounds its probes: an insert that would probe further than maxProbe slots (only a
// flood of colliding names does that) clears the table and draws a new key, as a full table
// is cleared, so that a lookup never costs more than maxProbe compares.
type internTable struct {
	slots  []internSlot // a power of two long
	n      int          // names held
	max    int          // names held at most, then the table is cleared
	k0, k1 uint64       // the short-name hash's key
	seed   maphash.Seed // the long-name hash's key
}

type internSlot struct {
	lo, hi uint64 // a short name's bytes (words16); 0 for a long one
	h      uint64
	s      string // "" for an empty slot: names are never empty
	plain  bool   // s is printable ASCII without quote or backslash: its own JSON text
}

const (
	internMinSlots = 256
	maxShortName   = 16
	maxProbe       = 64
)

func newInternTable(max int) internTable {
	t := internTable{max: max, slots: make([]internSlot, internMinSlots)}
	t.rekey()
	return t
}

// rekey draws a new hash key.
func (t *internTable) rekey() {
	t.seed = maphash.MakeSeed()
	t.k0 = maphash.Comparable(t.seed, uint64(0x9E3779B97F4A7C15))
	t.k1 = maphash.Comparable(t.seed, uint64(0xC2B2AE3D27D4EB4F))
}

// words16 returns a short name's bytes as textparse.PlainName does: two little-endian words,
// zero past the name's end.
func words16(s []byte) (lo, hi uint64) {
	var buf [2 * 8]byte
	copy(buf[:], s)
	return binary.LittleEndian.Uint64(buf[:8]), binary.LittleEndian.Uint64(buf[8:])
}

// shortHash hashes a short name given as its words and length.
func (t *internTable) shortHash(lo, hi uint64, n int) uint64 {
	h, l := bits.Mul64(lo^t.k0, hi^t.k1^uint64(n))
	return h ^ l
}

// lookupShort returns the interned copy of the short name of n bytes whose words are lo and
// hi, or ok false and the hash to give add; plain is the name's plain flag.
func (t *internTable) lookupShort(lo, hi uint64, n int) (v string, h uint64, ok, plain bool) {
	return t.lookupHashed(lo, hi, n, t.shortHash(lo, hi, n))
}

// lookupHashed is lookupShort with the hash computed by the caller, who may have looked at
// the first slot itself (first).
func (t *internTable) lookupHashed(lo, hi uint64, n int, h uint64) (v string, _ uint64, ok, plain bool) {
	mask := len(t.slots) - 1
	for i, p := int(h)&mask, 0; p < maxProbe; i, p = (i+1)&mask, p+1 {
		e := &t.slots[i]
		if e.lo == lo && e.hi == hi && len(e.s) == n {
			return e.s, h, true, e.plain
		}
		if len(e.s) == 0 {
			break
		}
	}
	return "", h, false, false
}

// first returns the slot a short name's hash points at, where most lookups end.
func (t *internTable) first(h uint64) *internSlot { return &t.slots[int(h)&(len(t.slots)-1)] }

// lookup returns the interned copy of s (not empty), or ok false and the hash to give add.
func (t *internTable) lookup(s []byte) (v string, h uint64, ok bool) {
	if len(s) <= maxShortName {
		lo, hi := words16(s)
		v, h, ok, _ = t.lookupShort(lo, hi, len(s))
		return v, h, ok
	}
	h = maphash.Bytes(t.seed, s)
	mask := len(t.slots) - 1
	for i, p := int(h)&mask, 0; p < maxProbe; i, p = (i+1)&mask, p+1 {
		e := &t.slots[i]
		if e.h == h && e.s == string(s) {
			return e.s, h, true
		}
		if len(e.s) == 0 {
			break
		}
	}
	return "", h, false
}

// hash is lookup's hash of s.
func (t *internTable) hash(s []byte) uint64 {
	if len(s) <= maxShortName {
		lo, hi := words16(s)
		return t.shortHash(lo, hi, len(s))
	}
	return maphash.Bytes(t.seed, s)
}

// add interns s, which lookup did not find (h is the hash it returned), and returns it as a
// string.
func (t *internTable) add(s []byte, h uint64) string {
	v := string(s)
	if t.n >= t.max {
		t.reset() // a bounded table: a flood of unique names costs allocations, not memory
	} else if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	e := internSlot{h: h, s: v, plain: isPlainName(v)}
	if len(s) <= maxShortName {
		e.lo, e.hi = words16(s)
	}
	if !t.put(e) {
		t.reset()
		t.rekey()
		e.h = t.hash(s)
		t.put(e) // into an empty table: the first slot it probes
	}
	return v
}

// put stores e in the first empty slot from its hash's, or reports that it is further than
// maxProbe.
func (t *internTable) put(e internSlot) bool {
	mask := len(t.slots) - 1
	for i, p := int(e.h)&mask, 0; p < maxProbe; i, p = (i+1)&mask, p+1 {
		if len(t.slots[i].s) == 0 {
			t.slots[i] = e
			t.n++
			return true
		}
	}
	return false
}

// grow doubles the slots and moves every name to its place in them.
func (t *internTable) grow() {
	old := t.slots
	t.slots, t.n = make([]internSlot, 2*len(old)), 0
	for _, e := range old {
		if len(e.s) != 0 && !t.put(e) {
			t.reset() // cannot happen with fewer probes in a larger table; stay bounded anyway
			return
		}
	}
}

// isPlainName reports a name of printable ASCII without quote or backslash: one that a JSON
// string holds as it is, so that its raw bytes between quotes are the name.
func isPlainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func (t *internTable) reset() {
	clear(t.slots)
	t.n = 0
}
