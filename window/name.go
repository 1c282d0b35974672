package window

import (
	"unicode/utf8"
	"unsafe"
)

// DefaultMaxNameLen is the longest key or metric name, in bytes, that slide's doors accept by
// default: the event decoder (event.Config.MaxKeyLen), snapshot restores and the limiter's
// keys (limiter.MaxKeyLen).
const DefaultMaxNameLen = 256

// ValidName reports whether s may name a series (its key or its metric) or a limiter key: not
// empty, valid UTF-8, and free of C0 controls (below U+0020: NUL, newline, ESC…), DEL, C1
// controls (U+0080–U+009F, among them U+009B, a terminal's CSI) and the bidirectional
// overrides and isolates (U+202A–U+202E, U+2066–U+2069, the "Trojan Source" characters,
// which reorder what a terminal or an editor shows). It is the one rule of every door:
// the event decoder (Kafka and POST /v1/events), snapshot restores, the limiter's keys and the
// read routes' key and metric parameters. Length is each door's own check. A name of
// printable ASCII, the usual one, is checked eight bytes at a time; it allocates nothing.
//
// The rule is Rust's (text_direction_codepoint_in_literal) for bidi controls and Unicode's
// Cc category for the rest: what a terminal, a log line or a table would show as something
// other than the bytes it holds. Other invisible characters (zero-width space, U+200E/F
// marks) are kept: they cannot hide or reorder text around them.
func ValidName(s string) bool {
	if len(s) == 0 {
		return false
	}
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		// A byte below 0x20 borrows into its high bit, 0x7f carries into it, one from 0x80 has
		// it: eight bytes in three operations. A borrow or carry into the next byte comes
		// only from a byte that is flagged itself.
		if (w-0x2020202020202020|w+0x0101010101010101|w)&0x8080808080808080 != 0 {
			return nonASCIIValid(s[i:])
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return nonASCIIValid(s[i:])
		}
	}
	return true
}

// ValidNameBytes is ValidName of b's bytes, without a copy.
func ValidNameBytes(b []byte) bool {
	return ValidName(unsafe.String(unsafe.SliceData(b), len(b))) // ValidName keeps nothing
}

// nonASCIIValid is ValidName's slow path, from the first byte that is not printable ASCII.
func nonASCIIValid(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	// In valid UTF-8, 0xC2 and 0xE2 are always lead bytes, so these compares find exactly
	// the refused code points: U+0080–U+009F is C2 80–9F, U+202A–U+202E E2 80 AA–AE,
	// U+2066–U+2069 E2 81 A6–A9.
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f:
			return false
		case c == 0xc2:
			if s[i+1] <= 0x9f {
				return false
			}
		case c == 0xe2:
			if b1, b2 := s[i+1], s[i+2]; b1 == 0x80 && b2 >= 0xaa && b2 <= 0xae || b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9 {
				return false
			}
		}
	}
	return true
}
