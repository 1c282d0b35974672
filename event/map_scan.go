package event

import (
	"fmt"
	"math/bits"

	"github.com/slide-metrics/slide/textparse"
)

// A map's fields are a tree of member names (mapNode), one level per object on their paths.
// A line is read by one walk over its members, level by level: each member's name is found by
// textparse.ScanString and matched against the level's names by its first byte and length
// (two loads and an AND for a member not wanted, the common case: an access log carries
// twenty-odd fields and a map reads five), a wanted member's value recorded where it lies,
// any other validated and skipped by the scanner's own SkipValue, as the decoder's member
// loop skips them (decode_fast.go). It takes exactly the objects textparse's Scanner takes
// (encoding/json's, to its nesting depth; FuzzEventMap holds it to encoding/json); a nested
// object on a path, validated by the level above, is walked again for its own members.

// mapNode is one object level of the fields' tree: the member names wanted there, each a
// leaf (a field ends there), an inner node (a path goes on into it), or both.
type mapNode struct {
	names []string
	leaf  []int       // by name: a field's leaf, or −1
	kids  []*mapNode  // by name: the level below, or nil
	first [256]uint64 // bit k: names[k] starts with this byte (a level holds at most 64 names)
	size  [64]uint64  // bit k: names[k] has this length (mod 64)
	words [][2]uint64 // by name: its bytes as textparse.PlainName reads them, when at most 16
	sc    textparse.Scanner
	buf   []byte // an escaped member name, unescaped
}

// add puts the field at path, leaf, under n.
func (n *mapNode) add(path []string, leaf int) {
	k := -1
	for i, name := range n.names {
		if name == path[0] {
			k = i
		}
	}
	if k < 0 {
		n.names = append(n.names, path[0])
		n.leaf = append(n.leaf, -1)
		n.kids = append(n.kids, nil)
		k = len(n.names) - 1
	}
	if len(path) == 1 {
		n.leaf[k] = leaf
		return
	}
	if n.kids[k] == nil {
		n.kids[k] = &mapNode{}
	}
	n.kids[k].add(path[1:], leaf)
}

// compile indexes each level's names by first byte and length.
func (n *mapNode) compile() {
	n.words = make([][2]uint64, len(n.names))
	for k, name := range n.names {
		n.first[name[0]] |= 1 << k
		n.size[len(name)&63] |= 1 << k
		if len(name) <= maxShortName {
			n.words[k][0], n.words[k][1] = words16([]byte(name))
		}
	}
	for _, kid := range n.kids {
		if kid != nil {
			kid.compile()
		}
	}
}

// check refuses a level of more than maxMapNames names.
func (n *mapNode) check() error {
	if len(n.names) > maxMapNames {
		return fmt.Errorf("event map: %d fields in one object, at most %d", len(n.names), maxMapNames)
	}
	for _, kid := range n.kids {
		if kid != nil {
			if err := kid.check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxMapNames bounds the names of one level, the bits of mapNode's index.
const maxMapNames = 64

// match returns the index of name among n's names, or −1.
func (n *mapNode) match(name []byte) int {
	if len(name) == 0 {
		return -1
	}
	for m := n.first[name[0]] & n.size[len(name)&63]; m != 0; m &= m - 1 {
		k := bits.TrailingZeros64(m)
		if n.names[k] == string(name) {
			return k
		}
	}
	return -1
}

// matchWords is match for a name of n ≤ 16 plain bytes given as PlainName's words: compared
// as two words, not as a string.
func (n *mapNode) matchWords(lo, hi uint64, size int) int {
	for m := n.first[byte(lo)] & n.size[size]; m != 0; m &= m - 1 {
		k := bits.TrailingZeros64(m)
		if w := n.words[k]; w[0] == lo && w[1] == hi {
			return k
		}
	}
	return -1
}

// resolve walks the object at line[at:end] (whitespace around it allowed only at the top,
// where end is len(line)), recording the values of n's fields in vals, the last of repeated
// members winning, and reports whether it is one JSON object (at the top: and nothing after
// it). Offsets are into line.
func (n *mapNode) resolve(line []byte, at, end int, vals []textparse.Value) bool {
	b := line[:end]
	i := textparse.SkipSpace(b, at)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	if i = textparse.SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return textparse.SkipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		var k int
		// A short plain name (the common one) is found and matched as two words; any other
		// is scanned, unescaped and compared as a string.
		j, lo, hi := textparse.PlainName(b, i+1)
		switch size := j - i - 1; {
		case j >= 0 && size > 0 && size < maxShortName && i+17 <= len(b): // (PlainName gives no words for 16 bytes)
			k = n.matchWords(lo, hi, size)
		case j >= 0:
			k = n.match(b[i+1 : j])
		default:
			var esc bool
			if j, esc = textparse.ScanString(b, i+1); j < 0 {
				return false
			}
			name := b[i+1 : j]
			if esc {
				n.buf, _ = textparse.Unquote(n.buf[:0], name)
				name = n.buf
			}
			k = n.match(name)
		}
		if i = j + 1; i < len(b) && b[i] <= ' ' {
			i = textparse.SkipSpace(b, i)
		}
		if i >= len(b) || b[i] != ':' {
			return false
		}
		if i++; i < len(b) && b[i] <= ' ' {
			i = textparse.SkipSpace(b, i)
		}
		if k < 0 {
			if i < len(b) && b[i] == '"' { // the common member not wanted: a string, skipped inline
				if i, _ = textparse.ScanString(b, i+1); i < 0 {
					return false
				}
				i++
			} else if i = n.sc.SkipValue(b, i); i < 0 {
				return false
			}
		} else {
			v, e := n.value(b, i)
			if e < 0 {
				return false
			}
			n.keep(line, k, v, vals)
			i = e
		}
		if i < len(b) && b[i] <= ' ' {
			i = textparse.SkipSpace(b, i)
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			if i++; i < len(b) && b[i] <= ' ' {
				i = textparse.SkipSpace(b, i)
			}
		case '}':
			return textparse.SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// value reads the JSON value at b[i] as the Scanner records one, and returns it and the
// index after it, or −1.
func (n *mapNode) value(b []byte, i int) (textparse.Value, int) {
	if i >= len(b) {
		return textparse.Value{}, -1
	}
	var k textparse.Kind
	switch c := b[i]; {
	case c == '"':
		j, esc := textparse.ScanString(b, i+1)
		if j < 0 {
			return textparse.Value{}, -1
		}
		return textparse.Value{Start: int32(i + 1), End: int32(j), Kind: textparse.String, Escaped: esc}, j + 1
	case c == '-' || c-'0' < 10:
		k = textparse.Number
	case c == 't':
		k = textparse.True
	case c == 'f':
		k = textparse.False
	case c == 'n':
		k = textparse.Null
	case c == '{':
		k = textparse.Object
	case c == '[':
		k = textparse.Array
	default:
		return textparse.Value{}, -1
	}
	j := n.sc.SkipValue(b, i)
	if j < 0 {
		return textparse.Value{}, -1
	}
	return textparse.Value{Start: int32(i), End: int32(j), Kind: k}, j
}

// keep records v, the value of n's name k, in vals, and walks it when a path goes on into it
// (a repeated member's walk overwrites the first's: the last wins).
func (n *mapNode) keep(line []byte, k int, v textparse.Value, vals []textparse.Value) {
	if l := n.leaf[k]; l >= 0 {
		vals[l] = v
	}
	if kid := n.kids[k]; kid != nil {
		kid.clear(vals)
		if v.Kind == textparse.Object {
			kid.resolve(line, int(v.Start), int(v.End), vals) // validated by SkipValue
		}
	}
}

// clear forgets the values of every field under n.
func (n *mapNode) clear(vals []textparse.Value) {
	for k, l := range n.leaf {
		if l >= 0 {
			vals[l] = textparse.Value{}
		}
		if kid := n.kids[k]; kid != nil {
			kid.clear(vals)
		}
	}
}
