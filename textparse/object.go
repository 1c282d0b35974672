package textparse

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
)

// MaxNesting is encoding/json's limit on nested objects and arrays, the object being scanned
// included, kept so that the scanner and encoding/json agree on which inputs are JSON.
const MaxNesting = 10000

// Kind is the type of a scanned value.
type Kind uint8

const (
	Absent Kind = iota // the zero Value: no value (a caller's field that was not in the object)
	Null
	False
	True
	Number
	String
	Object
	Array
	NaN // the bare tokens NaN, Infinity and -Infinity: not JSON, accepted only with Scanner.AllowNaN
)

// Value locates a value in the scanned input: b[Start:End] is a string's contents without
// its quotes, or the text of any other value (a number's literal, a literal's token, a
// container's whole text). Offsets are int32: the scanner refuses inputs of 2 GiB or more.
type Value struct {
	Start, End int32
	Kind       Kind
	Escaped    bool // a string with backslash escapes or non-ASCII bytes: Unquote decodes it
	Integer    bool // a number without fraction or exponent
}

// Bytes returns the value's text in b, the input it was scanned from.
func (v Value) Bytes(b []byte) []byte { return b[v.Start:v.End] }

// SyntaxError says where and why an input is not one JSON object.
type SyntaxError struct {
	What   string // "no opening brace", "unexpected end", "text after the object", …
	Offset int    // byte offset in the input
}

func (e *SyntaxError) Error() string { return e.What + " at byte " + strconv.Itoa(e.Offset) }

// Scanner walks the members of one flat JSON object: each call of Next scans one member,
// validating it completely (nested objects and arrays included, up to MaxNesting), and
// leaves its name in Name and its value in Value; no value is converted, so a member the
// caller does not want costs only its scan. Names are raw (compare them exactly, or Unquote
// them when Name.Escaped); a name that repeats is reported each time, and what a repeat
// means (the last wins, or a refusal) is the caller's rule.
//
// The zero value is ready: Reset it with an input. Scanning allocates nothing, but for a
// stack of open containers below the 64th level of nesting, which a Scanner keeps and
// reuses. Not safe for concurrent use.
type Scanner struct {
	// AllowNaN accepts the bare tokens NaN, Infinity and -Infinity as a member's value (Kind
	// NaN), for callers that refuse them by name rather than as invalid JSON.
	AllowNaN bool

	Name  Value // the current member's name (Kind String)
	Value Value // the current member's value
	// Field is the index of the current member's name in the names given to SetNames
	// (matched exactly, after unescaping), or −1.
	Field int

	b     []byte
	i     int
	state uint8
	what  string // why the input was refused, at offset i
	deep  []bool // open containers below the 64th level (skipNested)
	// tooDeep: the last skipNested refused its value for nesting past MaxNesting (TooDeep)
	tooDeep bool

	ns      *nameSet // SetNames's, nil for none: a Scanner stays small to create per line
	vals    []Value  // Into's
	scratch []byte   // an escaped name, unescaped
}

const (
	stStart uint8 = iota
	stMembers
	stDone
	stFailed
)

// Reset starts scanning b, one JSON object surrounded by optional whitespace.
func (s *Scanner) Reset(b []byte) {
	s.b, s.i, s.state, s.what, s.tooDeep = b, 0, stStart, "", false
	s.Name, s.Value, s.Field = Value{}, Value{}, -1
}

// Next scans the next member and reports whether there is one. When it returns false, Err
// says whether the object was complete and valid.
func (s *Scanner) Next() bool {
	b, i := s.b, s.i
	if s.state == stMembers {
		if i < len(b) && b[i] <= ' ' {
			i = SkipSpace(b, i)
		}
		if i >= len(b) {
			return s.fail(i, "unexpected end")
		}
		switch b[i] {
		case ',':
			if i++; i < len(b) && b[i] <= ' ' {
				i = SkipSpace(b, i)
			}
		case '}':
			return s.end(i)
		default:
			return s.fail(i, "expected , or }")
		}
	} else if i = s.open(); i < 0 {
		return false
	}
	// Compact JSON has no whitespace: each SkipSpace call is behind a one-byte test.
	if i >= len(b) || b[i] != '"' {
		return s.fail(i, "expected a key")
	}
	k := -1
	ns := s.ns
	if ns != nil && i+8 <= len(b) { // a known short name: one compare, no scan
		w := binary.LittleEndian.Uint64(b[i:])
		switch c := ns.first[byte(w>>8)]; c {
		case 0:
		case several:
			k = ns.pattern(w)
		default:
			if p := &ns.pats[c-1]; w&p.mask == p.w {
				k = int(c - 1)
			}
		}
	}
	if k >= 0 {
		p := &ns.pats[k]
		s.Name = Value{Start: int32(i + 1), End: int32(i + p.n - 1), Kind: String}
		s.Field = p.field
		i += p.n
	} else {
		j, esc := scanString(b, i+1)
		if j < 0 {
			return s.fail(i, "invalid key")
		}
		s.Name = Value{Start: int32(i + 1), End: int32(j), Kind: String, Escaped: esc}
		s.Field = s.field(b)
		i = j + 1
	}
	if i < len(b) && b[i] <= ' ' {
		i = SkipSpace(b, i)
	}
	if i >= len(b) || b[i] != ':' {
		return s.fail(i, "expected :")
	}
	if i++; i < len(b) && b[i] <= ' ' {
		i = SkipSpace(b, i)
	}
	if i >= len(b) {
		return s.fail(i, "missing value")
	}
	switch c := b[i]; {
	case c == '"': // the common values inline: strings and numbers
		j, esc := scanString(b, i+1)
		if j < 0 {
			return s.fail(i, "invalid string")
		}
		s.keep(Value{Start: int32(i + 1), End: int32(j), Kind: String, Escaped: esc})
		s.i = j + 1
	case c-'0' < 10:
		j, integer := scanNumber(b, i)
		if j < 0 {
			return s.fail(i, "invalid number")
		}
		s.keep(Value{Start: int32(i), End: int32(j), Kind: Number, Integer: integer})
		s.i = j
	default:
		v, j, what := s.value(b, i, s.AllowNaN)
		if j < 0 {
			return s.fail(i, what)
		}
		s.keep(v)
		s.i = j
	}
	return true
}

// open starts the object: it returns the index of the first member's name, or −1 when there
// is none (an empty object, an invalid start, or a scan already over).
func (s *Scanner) open() int {
	if s.state != stStart {
		return -1
	}
	b := s.b
	if len(b) >= math.MaxInt32 {
		s.fail(0, "input of 2 GiB or more")
		return -1
	}
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		s.fail(i, "no opening brace")
		return -1
	}
	if i = SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
		s.end(i)
		return -1
	}
	s.state = stMembers
	return i
}

// Err returns nil after the whole object was scanned, or a *SyntaxError.
func (s *Scanner) Err() error {
	if s.state != stFailed {
		return nil
	}
	return &SyntaxError{What: s.what, Offset: s.i}
}

// Done reports that the whole object was scanned and was valid.
func (s *Scanner) Done() bool { return s.state == stDone }

func (s *Scanner) fail(i int, what string) bool {
	s.state, s.i, s.what = stFailed, i, what
	return false
}

// end checks that only whitespace follows the closing brace at b[i].
func (s *Scanner) end(i int) bool {
	if j := SkipSpace(s.b, i+1); j != len(s.b) {
		return s.fail(j, "text after the object")
	}
	s.state, s.i = stDone, len(s.b)
	return false
}

// value scans the value at b[i] (i < len(b)) and returns it and the index after it, or −1
// and what is wrong.
func (s *Scanner) value(b []byte, i int, nan bool) (Value, int, string) {
	switch c := b[i]; {
	case c == '"':
		j, esc := scanString(b, i+1)
		if j < 0 {
			return Value{}, -1, "invalid string"
		}
		return Value{Start: int32(i + 1), End: int32(j), Kind: String, Escaped: esc}, j + 1, ""
	case c == '-' && nan && i+1 < len(b) && b[i+1] == 'I':
		return token(b, i, "-Infinity", NaN)
	case c == '-' || c-'0' < 10:
		j, integer := scanNumber(b, i)
		if j < 0 {
			return Value{}, -1, "invalid number"
		}
		return Value{Start: int32(i), End: int32(j), Kind: Number, Integer: integer}, j, ""
	case c == 't':
		return token(b, i, "true", True)
	case c == 'f':
		return token(b, i, "false", False)
	case c == 'n':
		return token(b, i, "null", Null)
	case c == 'N' && nan:
		return token(b, i, "NaN", NaN)
	case c == 'I' && nan:
		return token(b, i, "Infinity", NaN)
	case c == '{' || c == '[':
		j := s.skipNested(b, i)
		if j < 0 && s.tooDeep {
			return Value{}, -1, tooDeepWhat
		}
		if j < 0 {
			return Value{}, -1, "invalid nested value"
		}
		k := Object
		if c == '[' {
			k = Array
		}
		return Value{Start: int32(i), End: int32(j), Kind: k}, j, ""
	}
	return Value{}, -1, "invalid value"
}

// token matches lit at b[i].
func token(b []byte, i int, lit string, k Kind) (Value, int, string) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return Value{}, -1, "invalid literal"
	}
	return Value{Start: int32(i), End: int32(i + len(lit)), Kind: k}, i + len(lit), ""
}

// SkipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SWAR constants: a byte's high bit, and 1 in every byte.
const (
	hi8 = 0x8080808080808080
	lo8 = 0x0101010101010101
)

// scanString validates the string whose contents start at b[i] and returns the index of
// its closing quote (or −1) and whether it has escapes or non-ASCII bytes (Unquote checks the
// UTF-8). It looks at eight bytes at a time (SWAR): a word's quote, backslash and control
// bytes are found with the has-zero-byte trick, its non-ASCII bytes by their high bits. The
// trick can flag a byte above a true match (a borrow), never below, so the lowest flag is
// exact. (One function, not two: a call per string costs more than the short strings of
// an event.)
func scanString(b []byte, i int) (int, bool) {
	esc := false
	for {
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			q, bs := w^(lo8*'"'), w^(lo8*'\\')
			stop := (((q - lo8) &^ q) | ((bs - lo8) &^ bs) | ((w - lo8*0x20) &^ w)) & hi8
			if stop != 0 {
				n := bits.TrailingZeros64(stop)
				esc = esc || w&hi8&(1<<n-1) != 0 // non-ASCII before the stop
				i += n >> 3
				break
			}
			esc = esc || w&hi8 != 0
			i += 8
		}
		if i+8 > len(b) { // the last bytes, one at a time
			for ; i < len(b); i++ {
				c := b[i]
				if c == '"' || c == '\\' || c < 0x20 {
					break
				}
				esc = esc || c >= 0x80
			}
			if i >= len(b) {
				return -1, false
			}
		}
		switch b[i] {
		case '"':
			return i, esc
		case '\\':
			esc = true
			if i++; i >= len(b) {
				return -1, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(b) || hex4(b[i+1:i+5]) < 0 {
					return -1, false
				}
				i += 5
			default:
				return -1, false
			}
		default:
			return -1, false // control characters must be escaped
		}
	}
}

// scanNumber validates the JSON number at b[i] and returns the index after it (or −1) and
// whether it is an integer literal.
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		if i++; i >= len(b) {
			return -1, false
		}
	}
	switch {
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1, false
	}
	integer := true
	if i < len(b) && b[i] == '.' {
		integer = false
		if i++; i >= len(b) || b[i]-'0' >= 10 {
			return -1, false
		}
		i = skipDigits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i]-'0' >= 10 {
			return -1, false
		}
		for i++; i < len(b) && b[i]-'0' < 10; i++ {
		}
	}
	return i, integer
}

// tooDeepWhat is why a value nested past MaxNesting is refused: it may be valid JSON, but
// no reader of slide's takes it (encoding/json refuses it too).
const tooDeepWhat = "objects and arrays nested deeper than 10000 levels"

// TooDeep reports whether the last value SkipValue refused (or the last one Next refused)
// was refused for nesting deeper than MaxNesting rather than as invalid JSON, so that its
// caller can say so.
func (s *Scanner) TooDeep() bool { return s.tooDeep }

// skipNested validates the object or array at b[i] without recursion and returns the index
// after it or −1. The object being scanned is one level of nesting. The open containers are
// a stack of bits (1 for an object): the first 64 levels in a word, deeper ones in s.deep, so
// that a fresh Scanner allocates nothing for ordinary nesting.
func (s *Scanner) skipNested(b []byte, i int) int {
	var lo uint64 // bit k: level k is an object
	depth := 0
	s.tooDeep = false
	isObj := func(k int) bool {
		if k < 64 {
			return lo>>k&1 != 0
		}
		return s.deep[k-64]
	}
	for {
		// i is at the start of a value.
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth+1 >= MaxNesting {
				s.tooDeep = true
				return -1
			}
			if depth < 64 {
				lo = lo&^(1<<depth) | boolBit(c == '{')<<depth
			} else {
				s.deep = append(s.deep[:depth-64], c == '{')
			}
			depth++
			if i = SkipSpace(b, i+1); i >= len(b) {
				return -1
			}
			if (c == '{' && b[i] == '}') || (c == '[' && b[i] == ']') {
				depth--
				i++
				break // an empty container is a finished value
			}
			if c == '{' {
				if i = memberName(b, i); i < 0 {
					return -1
				}
			}
			continue // the first value inside
		default:
			_, j, _ := s.value(b, i, false) // never a container: those are above
			if i = j; i < 0 {
				return -1
			}
		}
		// A value ended at i: close containers until one continues with another value.
		for {
			if depth == 0 {
				return i
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return -1
			}
			obj := isObj(depth - 1)
			if (obj && b[i] == '}') || (!obj && b[i] == ']') {
				depth--
				i++
				continue
			}
			if b[i] != ',' {
				return -1
			}
			i = SkipSpace(b, i+1)
			if obj {
				if i = memberName(b, i); i < 0 {
					return -1
				}
			}
			break
		}
	}
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// memberName validates `"name" :` at b[i] and returns the index of the member's value, or −1.
func memberName(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	j, _ := scanString(b, i+1)
	if j < 0 {
		return -1
	}
	if i = SkipSpace(b, j+1); i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
}

// Elements walks the elements of an array that a Scanner returned as a member's Value (so
// already validated): for each one fn gets the element's Value, offsets into b. It stops
// early when fn returns false and reports whether it went through the whole array.
func (s *Scanner) Elements(b []byte, arr Value, fn func(Value) bool) bool {
	if arr.Kind != Array {
		return false
	}
	end := int(arr.End) - 1 // the closing bracket
	i := SkipSpace(b, int(arr.Start)+1)
	for i < end {
		v, j, _ := s.value(b, i, false)
		if j < 0 {
			return false // cannot happen on a validated array
		}
		if !fn(v) {
			return false
		}
		if i = SkipSpace(b, j); i < end { // a comma
			i = SkipSpace(b, i+1)
		}
	}
	return true
}
