package textparse

import (
	"bytes"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote appends the unescaped contents of a string the Scanner validated (b[v.Start:v.End]
// of a String value) to dst, exactly as encoding/json decodes it: invalid UTF-8 and lone
// surrogates become U+FFFD, and lossy reports that something was replaced, so that callers
// for whom a string is an identity (keys are bytes) can refuse it rather than rewrite it.
// s must come from the Scanner: an unvalidated escape may panic.
func Unquote(dst, s []byte) (out []byte, lossy bool) {
	if bytes.IndexByte(s, '\\') < 0 {
		if utf8.Valid(s) {
			return append(dst, s...), false
		}
	}
	out = dst
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr := hex4(s[r+1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							out = utf8.AppendRune(out, dec)
							r += 6
							continue
						}
					}
					rr, lossy = unicode.ReplacementChar, true
				}
				out = utf8.AppendRune(out, rr)
				continue
			default: // '"', '\\', '/'
				out = append(out, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			lossy = lossy || (rr == utf8.RuneError && size == 1)
			out = utf8.AppendRune(out, rr)
			r += size
		}
	}
	return out, lossy
}

// Lossy reports whether the string s (validated by the Scanner, quotes excluded) holds
// invalid UTF-8 or an escaped lone surrogate: what Unquote, like encoding/json, replaces with
// U+FFFD. It allocates nothing.
func Lossy(s []byte) bool {
	if bytes.IndexByte(s, '\\') < 0 {
		return !utf8.Valid(s)
	}
	if !utf8.Valid(s) {
		return true
	}
	for r := 0; r < len(s); r++ {
		if s[r] != '\\' {
			continue
		}
		r++
		if s[r] != 'u' {
			continue
		}
		rr := hex4(s[r+1:])
		r += 4
		if !utf16.IsSurrogate(rr) {
			continue
		}
		if r+7 > len(s) || s[r+1] != '\\' || s[r+2] != 'u' || utf16.DecodeRune(rr, hex4(s[r+3:])) == unicode.ReplacementChar {
			return true
		}
		r += 6 // the pair's second half
	}
	return false
}

// hex4 decodes four hex digits, or returns -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
