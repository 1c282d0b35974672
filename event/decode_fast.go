package event

import (
	"encoding/binary"
	"math"

	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// The fast paths read the shapes nearly every producer writes, in one pass that validates
// and converts as it goes. exact takes Append's layout, the one `slide produce` and
// the benchmark write:
//
//	{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431}
//
// with an optional "count" last, compact, comparing the text between the values a word at a
// time; where a compact prefix of that layout is followed by a comma and anything else (an
// extra member, the rest out of order) it hands the position it reached to fast's member
// loop, so that the line is still read once. fast takes any object of the eight members in
// any order, with whitespace between tokens and other members among them (a known member
// given twice makes them give up, and the scanner path refuses the line): a name it does not match by one compare is read by the scanner's own MemberName
// (which unescapes it and matches it as the scanner path does), and an unknown member's value
// is validated and skipped by its SkipValue, so extra strings, numbers, nested objects and
// arrays cost a skip, not a second pass. exact takes key and metric only as printable ASCII
// without escapes and ts and count as integer literals; fast also takes escaped or non-ASCII
// names (through the scanner path's own name checks), ts as RFC 3339 text, and null ts and
// count, and fast reads labels and trace_id and span_id as strings or null (exact hands such
// a member to its loop, as any member not in its layout; an id of another type is the
// scanner path's, which reads it as no id). value is any JSON number for both (converted
// as the general path converts it, by textparse.ParseFloat's rules, bit for bit). Every
// line they take decodes to what the
// general path (parseObject and event) returns for it, and they take only lines that the
// general path accepts; on anything else (a NaN, a string value, a missing member, an error
// of any kind) they give up and the general path decodes the line, going on from the end of
// the last member they read (they record each one's value as the scanner would: rest), so
// that every refusal and its Reason come from one place. FuzzDecodeFast holds the paths to
// each other.

// Field names as the first bytes of a little-endian word, quotes included (the colon is
// checked after them, so that `"ts" : 1` is one compare too).
const (
	patTS     = uint64('"') | uint64('t')<<8 | uint64('s')<<16 | uint64('"')<<24
	patKey    = uint64('"') | uint64('k')<<8 | uint64('e')<<16 | uint64('y')<<24 | uint64('"')<<32
	patMetric = uint64('"') | uint64('m')<<8 | uint64('e')<<16 | uint64('t')<<24 | uint64('r')<<32 | uint64('i')<<40 | uint64('c')<<48 | uint64('"')<<56
	patValue  = uint64('"') | uint64('v')<<8 | uint64('a')<<16 | uint64('l')<<24 | uint64('u')<<32 | uint64('e')<<40 | uint64('"')<<48
	patCount  = uint64('"') | uint64('c')<<8 | uint64('o')<<16 | uint64('u')<<24 | uint64('n')<<32 | uint64('t')<<40 | uint64('"')<<48
	patLabels = uint64('"') | uint64('l')<<8 | uint64('a')<<16 | uint64('b')<<24 | uint64('e')<<32 | uint64('l')<<40 | uint64('s')<<48 | uint64('"')<<56
	mask4     = 1<<32 - 1
	mask5     = 1<<40 - 1
	mask6     = 1<<48 - 1
	mask7     = 1<<56 - 1
)

// exact's answers.
const (
	exactNo      = iota // not the layout: fast reads the line from its start
	exactTook           // decoded: ev is complete
	exactRefused        // exact read a prefix of the layout, and fast would give up after it (members gave up, or exact saw why): the scanner path goes on after the prefix
)

// Word patterns of the layout Append writes, `{"ts":1,"key":"k","metric":"m","value":2}`:
// the text between the values, a little-endian word at a time.
var (
	patOpenTS    = binary.LittleEndian.Uint64([]byte(`{"ts":` + "\x00\x00")) // 6 bytes, masked
	patKeyOpen   = binary.LittleEndian.Uint64([]byte(`,"key":"`))
	patMetricA   = binary.LittleEndian.Uint64([]byte(`","metri`)) // from the key's closing quote
	patMetricB   = binary.LittleEndian.Uint64([]byte(`etric":"`)) // 4 bytes later, overlapping
	patValueOpen = binary.LittleEndian.Uint64([]byte(`","value`)) // from the metric's closing quote
	patCountOpen = binary.LittleEndian.Uint64([]byte(`,"count"`))
)

// exact decodes b when it has exactly Append's layout (what `slide produce`, the
// benchmark and most producers write): the members ts, key, metric, value and an optional
// count in that order, compact, the text between the values compared a word at a time. When
// a compact prefix of the layout is followed by a comma and something else (another member,
// a member out of order), it hands the rest of the line to members, fast's loop, with what
// it has read: such a line is still read once. It returns exactTook when ev is complete,
// exactNo when fast should read the line as it may be, and exactRefused when members gave
// up or the value is not a number (fast would give up there too: up to that byte it reads
// what exact read); then d.restAt and d.restSeen say where rest goes on.
func (d *Decoder) exact(b []byte, defaultTS int64, ev *window.Event) int {
	n := len(b)
	if n < 48 || n >= math.MaxInt32 {
		return exactNo // 48: `{"ts":0,"key":"k","metric":"m","value":0}` is 41, and the words read ahead
	}
	head := (*[22]byte)(b[:22])
	if binary.LittleEndian.Uint64(head[:8])&mask6 != patOpenTS {
		return exactNo
	}
	// ts at offset 6: its digits as two words when it is a plain run of 1 to 15 of them
	// (a sign, a leading zero or more digits go to Integer). What follows it must be the
	// comma of `,"key":"`, which the next compare checks.
	u, i := textparse.Digits16(binary.LittleEndian.Uint64(head[6:14]), binary.LittleEndian.Uint64(head[14:22]))
	ts := int64(u)
	if i == 0 || i == 16 || (i > 1 && head[6] == '0') {
		if ts, i = textparse.Integer(b, 6); i < 0 {
			return exactNo
		}
	} else {
		i += 6
	}
	ev.TS, ev.Count = ts, 1
	tsEnd := i
	if i+8 > n || binary.LittleEndian.Uint64(b[i:i+8]) != patKeyOpen {
		d.pre = prefixEnds{int32(tsEnd)}
		return d.handOff(b, i, 1<<fTS, defaultTS, ev)
	}
	key, j := d.quickName(b, i+8, false)
	if j < 0 {
		return exactNo
	}
	ev.Key = key
	keyEnd := j
	if j+16 > n {
		d.pre = prefixEnds{int32(tsEnd), int32(keyEnd)}
		return d.handOff(b, j+1, 1<<fTS|1<<fKey, defaultTS, ev)
	}
	if w := (*[16]byte)(b[j : j+16]); binary.LittleEndian.Uint64(w[:8]) != patMetricA || binary.LittleEndian.Uint64(w[4:12]) != patMetricB {
		d.pre = prefixEnds{int32(tsEnd), int32(keyEnd)}
		return d.handOff(b, j+1, 1<<fTS|1<<fKey, defaultTS, ev)
	}
	var metric string
	if i = j + 12; i+16 <= n && d.sameMetric((*[16]byte)(b[i:i+16])) {
		metric, j = d.lastMetric, i+d.lastN // most lines repeat the previous metric
	} else {
		metric, j = d.quickName(b, i, true)
	}
	if j < 0 {
		return exactNo
	}
	ev.Metric = metric
	if j+10 > n {
		d.pre = prefixEnds{int32(tsEnd), int32(keyEnd), int32(j)}
		return d.handOff(b, j+1, 1<<fTS|1<<fKey|1<<fMetric, defaultTS, ev)
	}
	if w := (*[10]byte)(b[j : j+10]); binary.LittleEndian.Uint64(w[:8]) != patValueOpen || w[8] != '"' || w[9] != ':' {
		d.pre = prefixEnds{int32(tsEnd), int32(keyEnd), int32(j)}
		return d.handOff(b, j+1, 1<<fTS|1<<fKey|1<<fMetric, defaultTS, ev)
	}
	// The value ends the line as a rule: then it is the bytes before the closing brace, one
	// word for a short decimal. Otherwise (a count follows, or a long number) Float reads it.
	i = j + 10
	count := uint64(1)
	if l := n - 1 - i; b[n-1] == '}' && l >= 1 && l <= 8 {
		if v, ok := textparse.Decimal8(binary.LittleEndian.Uint64(b[n-9:n-1])>>(8*uint(8-l)&63), l); ok {
			ev.Value, ev.Feed = v, 0
			return exactTook // the line's end is known: nothing after the value to check
		}
	}
	vi := i
	v, i := textparse.Float(b, i)
	if i < 0 || i >= n {
		// Not a number (a string, NaN, null), or the line ends in it: fast would give up
		// here too, unless the value follows a space.
		if i < 0 && vi < n && b[vi] <= ' ' { // (vi = n: the line ends after the colon)
			return exactNo
		}
		d.pre = prefixEnds{int32(tsEnd), int32(keyEnd), int32(vi - 10)}
		return d.refuse(b, vi-9, 1<<fTS|1<<fKey|1<<fMetric)
	}
	ev.Value, ev.Feed = v, 0
	if b[i] == ',' {
		if i+9 > n || binary.LittleEndian.Uint64(b[i:i+8]) != patCountOpen || b[i+8] != ':' {
			d.pre = prefixEnds{int32(tsEnd), int32(keyEnd), int32(vi - 10), int32(i)}
			return d.handOff(b, i, 1<<fTS|1<<fKey|1<<fMetric|1<<fValue, defaultTS, ev)
		}
		c, k := textparse.Integer(b, i+9)
		if k < 0 || c < 1 || k >= n {
			return exactNo // (fast also takes a null count)
		}
		valueEnd := i
		count, i = uint64(c), k
		ev.Count = count
		if b[i] == ',' {
			d.pre = prefixEnds{int32(tsEnd), int32(keyEnd), int32(vi - 10), int32(valueEnd), int32(k)}
			return d.handOff(b, i, 1<<fTS|1<<fKey|1<<fMetric|1<<fValue|1<<fCount, defaultTS, ev)
		}
	}
	if b[i] != '}' || (i+1 != n && textparse.SkipSpace(b, i+1) != n) {
		return exactNo
	}
	return exactTook
}

// handOff gives members the rest of the line after exact's compact prefix, the members in
// seen read into ev, when b[i] is the comma after them; otherwise the line is fast's.
func (d *Decoder) handOff(b []byte, i int, seen uint8, defaultTS int64, ev *window.Event) int {
	if i >= len(b) || b[i] != ',' {
		return exactNo
	}
	ok, at, own := d.members(b, i+1, seen, i, defaultTS, ev)
	if ok {
		if own&(1<<fTraceID) != 0 {
			d.memberIDs(b, own, ev)
		}
		return exactTook
	}
	d.prefixSpans(b, seen&^own)
	d.restAt, d.restSeen = at, seen|own
	return exactRefused
}

// refuse hands the line to the scanner path (rest) from b[at], the end of exact's compact
// prefix of the members in seen, where fast would give up too.
func (d *Decoder) refuse(b []byte, at int, seen uint8) int {
	d.prefixSpans(b, seen)
	d.restAt, d.restSeen = at, seen
	return exactRefused
}

// prefixEnds are where the members of exact's compact prefix end (ts, the closing quotes
// of key and metric, value, count), set where exact hands a line on, for prefixSpans.
type prefixEnds [5]int32

// prefixSpans records in d.f, as the scanner would, the members of exact's compact prefix
// in seen (ts, then key, metric, value and count, each present only when the one before is),
// for rest, from their ends in d.pre (each starts a fixed distance after the one before).
func (d *Decoder) prefixSpans(b []byte, seen uint8) {
	e := &d.pre
	if seen&(1<<fTS) != 0 {
		d.f[fTS] = textparse.Value{Start: 6, End: e[0], Kind: textparse.Number, Integer: true}
	}
	if seen&(1<<fKey) != 0 { // `,"key":"` after ts
		d.f[fKey] = textparse.Value{Start: e[0] + 8, End: e[1], Kind: textparse.String}
	}
	if seen&(1<<fMetric) != 0 { // `","metric":"` after the key's contents
		d.f[fMetric] = textparse.Value{Start: e[1] + 12, End: e[2], Kind: textparse.String}
	}
	if seen&(1<<fValue) != 0 { // `","value":`
		d.f[fValue] = textparse.Value{Start: e[2] + 10, End: e[3], Kind: textparse.Number}
	}
	if seen&(1<<fCount) != 0 { // `,"count":`
		d.f[fCount] = textparse.Value{Start: e[3] + 9, End: e[4], Kind: textparse.Number, Integer: true}
	}
}

// fast decodes b into ev when b is one object of the event's members in any order, spaced
// or not, with other members among them, and reports whether it did; ev is then complete.
// On false ev holds nothing of use, and d.restAt says where the scanner path can go on. A
// known member's name is one masked compare (the colon, after optional whitespace, checked
// next); any other name (an unknown member, an escaped name) is read by the scanner's own
// MemberName, which matches it against the event's names as the scanner path does, and an
// unknown member's value is validated and skipped by its SkipValue, so such a line still
// decodes in this one pass. A known member given twice makes it give up before its value:
// the scanner path refuses the line.
func (d *Decoder) fast(b []byte, defaultTS int64, ev *window.Event) bool {
	n := len(b)
	if n < 8 || b[0] != '{' || n >= math.MaxInt32 { // the scanner refuses 2 GiB and more
		d.restAt = 0
		return false
	}
	ev.TS, ev.Count = defaultTS, 1
	ok, at, own := d.members(b, 1, 0, 0, defaultTS, ev)
	if ok && own&(1<<fTraceID) != 0 {
		d.memberIDs(b, own, ev)
	}
	d.restAt, d.restSeen = at, own
	return ok
}

// members is fast's loop over the members from b[i] (the start of a member, or whitespace
// before it) to the end of the line, the members in seen already read into ev. On false it
// returns where the scanner path can go on (rest): at, the end of the last member read (the
// caller's at when it read none; 0 for none at all), and own, the fields it recorded in d.f.
// On true ev is complete but for its ids: trace_id and span_id are only recorded in d.f, and
// the caller reads them (memberIDs) when own has trace_id, out of this loop, whose other
// members are the hot path.
func (d *Decoder) members(b []byte, i int, seen uint8, at int, defaultTS int64, ev *window.Event) (ok bool, _ int, own uint8) {
	n := len(b)
	named := false
	for {
		var w uint64
		if i+8 <= n {
			w = binary.LittleEndian.Uint64(b[i:])
		}
		var f int
		switch {
		case w&mask4 == patTS:
			f, i = fTS, i+4
		case w&mask5 == patKey:
			f, i = fKey, i+5
		case w&mask7 == patValue:
			f, i = fValue, i+7
		case w == patMetric:
			f, i = fMetric, i+8
		case w&mask7 == patCount:
			f, i = fCount, i+7
		case w == patLabels:
			f, i = fLabels, i+8
		default:
			if i < n && b[i] <= ' ' { // spaced: `{ "ts": 1, "key": "a" }`
				if i = textparse.SkipSpace(b, i); i < n && b[i] == '"' {
					continue
				}
				return false, at, own
			}
			if f, i = d.sc.MemberName(b, i); i < 0 {
				return false, at, own
			}
			if f < 0 {
				f = fOther
			}
			named = true // MemberName read the colon too
		}
		if f != fOther && seen&(1<<f) != 0 {
			return false, at, own // a known member given twice: the scanner path refuses the line
		}
		if named {
			named = false
		} else if i < n && b[i] == ':' {
			i++
		} else if i = colon(b, i); i < 0 {
			return false, at, own
		}
		if i < n && b[i] <= ' ' {
			i = skipSpace(b, i)
		}
		if i >= n {
			return false, at, own
		}
		// Each value read is also recorded in d.f as the scanner records it, so that when a
		// later member makes the path give up, the scanner path goes on from the end of this
		// one (rest) instead of from the start.
		switch f {
		case fTS:
			switch c := b[i]; {
			case c == '"': // RFC 3339 text, unescaped as the scanner path does
				j, esc := textparse.ScanString(b, i+1)
				if j < 0 {
					return false, at, own
				}
				t := b[i+1 : j]
				if esc {
					t, _ = d.unquote(t)
				}
				ms, ok := textparse.RFC3339Millis(t)
				if !ok {
					return false, at, own
				}
				d.f[fTS] = textparse.Value{Start: int32(i + 1), End: int32(j), Kind: textparse.String, Escaped: esc}
				ev.TS, i = ms, j+1
			case c == 'n':
				j := nullEnd(b, i)
				if j < 0 {
					return false, at, own
				}
				d.f[fTS] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Null}
				ev.TS, i = defaultTS, j
			default:
				v, j := textparse.Integer(b, i)
				if j < 0 {
					return false, at, own
				}
				d.f[fTS] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Number, Integer: true}
				ev.TS, i = v, j
			}
		case fValue:
			v, j := textparse.Float(b, i)
			if j < 0 {
				return false, at, own
			}
			d.f[fValue] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Number}
			ev.Value, i = v, j
		case fCount:
			if b[i] == 'n' {
				j := nullEnd(b, i)
				if j < 0 {
					return false, at, own
				}
				d.f[fCount] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Null}
				ev.Count, i = 1, j
				break
			}
			v, j := textparse.Integer(b, i)
			if j < 0 || v < 1 {
				return false, at, own
			}
			d.f[fCount] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Number, Integer: true}
			ev.Count, i = uint64(v), j
		case fLabels:
			if i = d.memberLabels(b, i); i < 0 {
				return false, at, own
			}
		case fOther, fTraceID, fSpanID: // skipped as the scanner path skips it; ids recorded (memberID)
			if f == fOther {
				i = d.sc.SkipValue(b, i)
			} else {
				i = d.memberID(b, i, f)
			}
			if i < 0 {
				return false, at, own
			}
		default: // key, metric
			if b[i] != '"' {
				return false, at, own
			}
			var v string
			if j, lo, hi := textparse.PlainName(b, i+1); j >= 0 {
				s := b[i+1 : j]
				if len(s) == 0 || len(s) > d.maxKey {
					return false, at, own
				}
				d.f[f] = textparse.Value{Start: int32(i + 1), End: int32(j), Kind: textparse.String}
				v, i = d.fastName(s, lo, hi, f == fMetric), j
			} else { // escapes or non-ASCII: the scanner's scan and the scanner path's own checks
				j, esc := textparse.ScanString(b, i+1)
				if j < 0 {
					return false, at, own
				}
				sp := textparse.Value{Start: int32(i + 1), End: int32(j), Kind: textparse.String, Escaped: esc}
				var r Reason
				if v, r = d.name(b, sp, f == fMetric); r != ReasonNone {
					return false, at, own
				}
				d.f[f], i = sp, j
			}
			if f == fMetric {
				ev.Metric = v
			} else {
				ev.Key = v
			}
			i++ // the closing quote
		}
		seen |= 1 << f
		if f != fOther {
			own |= 1 << f
		}
		at = i // a member read: the scanner path can go on from here
		if i >= n {
			return false, at, own
		}
		c := b[i]
		if c <= ' ' {
			if i = skipSpace(b, i); i >= n {
				return false, at, own
			}
			c = b[i]
		}
		if c == ',' {
			if i++; i < n && b[i] <= ' ' { // `, "key"`: to the name, without a turn of the loop
				i = skipSpace(b, i)
			}
			continue
		}
		if c != '}' {
			return false, at, own
		}
		const required = 1<<fKey | 1<<fMetric | 1<<fValue
		if seen&required != required || (i+1 != n && textparse.SkipSpace(b, i+1) != n) {
			return false, at, own
		}
		if seen&(1<<fLabels) != 0 && d.lab.n > 0 { // exact never reads labels: they are this loop's
			ev.Key = d.seriesOf(ev.Key)
		}
		return true, at, own
	}
}

// skipSpace is textparse.SkipSpace with the one space of `": "` and `", "` first.
func skipSpace(b []byte, i int) int {
	if i+1 < len(b) && b[i] == ' ' && b[i+1] > ' ' {
		return i + 1
	}
	return textparse.SkipSpace(b, i)
}

// colon returns the index after the colon at b[i], whitespace before it skipped, or −1:
// members' path for `"ts" : 1`, out of its loop.
//
//go:noinline
func colon(b []byte, i int) int {
	if i = textparse.SkipSpace(b, i); i < len(b) && b[i] == ':' {
		return i + 1
	}
	return -1
}

// memberID records in d.f[f], as the scanner would, the trace_id or span_id member's value at
// b[i] when it is a string or null, and returns the index after it, or −1 where the member
// loop gives up (another type: the scanner path's, which reads it as no id).
func (d *Decoder) memberID(b []byte, i, f int) int {
	if b[i] == 'n' {
		j := nullEnd(b, i)
		if j >= 0 {
			d.f[f] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Null}
		}
		return j
	}
	if b[i] != '"' {
		return -1
	}
	j, esc := textparse.ScanString(b, i+1)
	if j < 0 {
		return -1
	}
	d.f[f] = textparse.Value{Start: int32(i + 1), End: int32(j), Kind: textparse.String, Escaped: esc}
	return j + 1
}

// memberIDs sets ev's ids from the trace_id and span_id members (those in own) that members
// recorded, when it took the line: after the rest of the event, as the scanner path reads
// them (a span id alone is none).
func (d *Decoder) memberIDs(b []byte, own uint8, ev *window.Event) {
	var sv textparse.Value
	if own&(1<<fSpanID) != 0 {
		sv = d.f[fSpanID]
	}
	d.traceIDs(b, d.f[fTraceID], sv, ev)
}

// nullEnd returns the index after the literal null at b[i], or −1.
func nullEnd(b []byte, i int) int {
	if i+4 > len(b) || string(b[i:i+4]) != "null" {
		return -1
	}
	return i + 4
}
