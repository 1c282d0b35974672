package event

import (
	"encoding/binary"
	"math/bits"

	"github.com/slide-metrics/slide/textparse"
)

// The fast paths' key and metric names (decode_fast.go): a name is read a word at a time
// where it is short and plain, and interned (decode_intern.go) without the scanner path's
// checks, which printable ASCII passes; the previous metric is a one-entry cache in front of
// the table, compared as words, since most lines repeat it.

// quickName reads the key or metric whose contents start at b[i] for exact, and returns it
// and the index of its closing quote, or −1. A short name is found by its closing quote
// alone and looked up by its words: one that the table holds with its plain flag is a name
// whose bytes were checked (printable ASCII, so valid UTF-8 without control bytes, and
// without backslash, so the first quote closes it) when it entered the table; only a name
// not there is scanned by textparse.PlainString before it enters. A long one goes through
// PlainString and fastName.
func (d *Decoder) quickName(b []byte, i int, metric bool) (string, int) {
	if i+16 > len(b) {
		return "", -1
	}
	w := (*[16]byte)(b[i : i+16])
	lo, hi := binary.LittleEndian.Uint64(w[:8]), binary.LittleEndian.Uint64(w[8:])
	var n int
	if q := textparse.Quotes(lo); q != 0 {
		n = bits.TrailingZeros64(q) >> 3
		lo, hi = lo&(1<<(8*n&63)-1), 0
	} else if q := textparse.Quotes(hi); q != 0 {
		n = bits.TrailingZeros64(q) >> 3
		hi &= 1<<(8*n&63) - 1
		n += 8
	} else { // longer than 16 bytes
		j := textparse.PlainString(b, i)
		if j < 0 || j-i > d.maxKey {
			return "", -1
		}
		return d.fastName(b[i:j], 0, 0, metric), j
	}
	if n == 0 || n > d.maxKey {
		return "", -1
	}
	if metric && n == d.lastN && lo == d.lastLo && hi == d.lastHi {
		return d.lastMetric, i + n
	}
	h := d.intern.shortHash(lo, hi, n)
	if e := d.intern.first(h); e.lo == lo && e.hi == hi && len(e.s) == n && e.plain && !metric {
		return e.s, i + n // a known key in its first slot: the common case, without a call
	}
	v, h, ok, plain := d.intern.lookupHashed(lo, hi, n, h)
	if !ok {
		if textparse.PlainString(b, i) != i+n {
			return "", -1 // not a plain string: the general path's
		}
		v = d.intern.add(b[i:i+n], h)
	} else if !plain {
		return "", -1 // the same bytes as a name that came escaped, or not ASCII
	}
	if metric {
		d.setLastShort(v, lo, hi, n)
	}
	return v, i + n
}

// fastName interns a key or metric that PlainName passed (lo and hi its words, lo zero when
// it did not read them): printable ASCII is valid UTF-8 without control bytes, so a new
// name needs none of name's checks.
func (d *Decoder) fastName(s []byte, lo, hi uint64, metric bool) string {
	if lo == 0 { // long, or at the end of the line
		if metric && string(s) == d.lastMetric {
			return d.lastMetric
		}
		v, h, ok := d.intern.lookup(s)
		if !ok {
			v = d.intern.add(s, h)
		}
		if metric {
			d.setLastMetric(v)
		}
		return v
	}
	if metric && len(s) == d.lastN && lo == d.lastLo && hi == d.lastHi {
		return d.lastMetric
	}
	v, h, ok, _ := d.intern.lookupShort(lo, hi, len(s))
	if !ok {
		v = d.intern.add(s, h)
	}
	if metric {
		d.setLastShort(v, lo, hi, len(s))
	}
	return v
}

// setLastMetric sets the one-entry metric cache, with its words when it is short and plain.
func (d *Decoder) setLastMetric(v string) {
	d.lastMetric, d.lastN, d.lastQMask = v, -1, [2]uint64{}
	if len(v) <= maxShortName && isPlainName(v) {
		var buf [2 * 8]byte
		copy(buf[:], v)
		lo, hi := words16(buf[:])
		d.setLastShort(v, lo, hi, len(v))
	}
}

// setLastShort sets the metric cache to v, a plain name of n ≤ 16 bytes whose words are lo
// and hi, and, when n ≤ 15, the words of v and its closing quote that sameMetric compares.
func (d *Decoder) setLastShort(v string, lo, hi uint64, n int) {
	d.lastMetric, d.lastLo, d.lastHi, d.lastN = v, lo, hi, n
	d.lastQMask = [2]uint64{}
	if n <= 15 {
		var buf [2 * 8]byte
		copy(buf[:], v)
		buf[n] = '"'
		d.lastQ[0], d.lastQ[1] = words16(buf[:])
		d.lastQMask[0], d.lastQMask[1] = maskBytes(n+1), maskBytes(n+1-8)
	}
}

// maskBytes is a word's mask of its k lowest bytes (none for k ≤ 0, all for k ≥ 8).
func maskBytes(k int) uint64 {
	if k <= 0 {
		return 0
	}
	return 1<<(8*uint(k)) - 1 // all ones for k ≥ 8: the shift gives 0
}

// sameMetric reports that w, the sixteen bytes at a metric's contents, start with the
// previous metric and its closing quote: the metric is that one, with no scan or lookup (a
// plain name has no quote or backslash, so the quote compared is the closing one).
func (d *Decoder) sameMetric(w *[16]byte) bool {
	lo, hi := binary.LittleEndian.Uint64(w[:8]), binary.LittleEndian.Uint64(w[8:])
	return d.lastQMask[0] != 0 && lo&d.lastQMask[0] == d.lastQ[0] && hi&d.lastQMask[1] == d.lastQ[1]
}
