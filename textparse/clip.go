package textparse

import (
	"strconv"
	"unicode/utf8"
)

// MaxEcho bounds how much of a client's or a file's text an error message quotes back: a
// 1 MB value gets a short error, not a 1 MB (or, escaped, 6 MB) one.
const MaxEcho = 64

// Clip shortens s for an error message that quotes it: at most MaxEcho bytes, cut at a rune
// boundary, and a note of the whole length ("…(1048576 bytes)"). Shorter text is s itself.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	n := MaxEcho
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
