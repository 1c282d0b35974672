// This file is over 600 lines: one hand-written scanner for the event JSON, kept together
// because its speed depends on inlining across its parts; sharing it with batch and the
// limiter (issue #10) will move the scanner out.

package ingest

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/slide-metrics/slide/internal/rfc3339"
	"github.com/slide-metrics/slide/window"
)

// Decoder defaults.
const (
	DefaultMaxKeyLen   = 256     // bytes of a decoded key or metric name
	DefaultMaxInterned = 1 << 16 // distinct key and metric strings a Decoder keeps
)

// maxNestingDepth is encoding/json's limit on nested objects and arrays, kept so that the
// two decoders agree on which inputs are JSON.
const maxNestingDepth = 10000

// DecoderConfig configures a Decoder. The zero value means the defaults.
type DecoderConfig struct {
	// MaxKeyLen is the longest key or metric name accepted, in bytes after unescaping;
	// longer ones are refused with ReasonKeyTooLong. Default DefaultMaxKeyLen (256).
	MaxKeyLen int
	// MaxInterned bounds the decoder's table of key and metric strings. Decoding an event
	// whose strings are in the table allocates nothing; when the table is full it is
	// cleared and refills. Default DefaultMaxInterned (65,536).
	MaxInterned int
}

// Validate reports a config NewDecoder would refuse.
func (c DecoderConfig) Validate() error {
	if c.MaxKeyLen < 0 {
		return fmt.Errorf("max key length %d: must not be negative", c.MaxKeyLen)
	}
	if c.MaxInterned < 0 {
		return fmt.Errorf("max interned %d: must not be negative", c.MaxInterned)
	}
	return nil
}

func (c DecoderConfig) withDefaults() DecoderConfig {
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = DefaultMaxKeyLen
	}
	if c.MaxInterned == 0 {
		c.MaxInterned = DefaultMaxInterned
	}
	return c
}

// Decoder turns JSON events into window.Events:
//
//	{"ts": 1764489600123, "key": "tenant-42", "metric": "latency_ms", "value": 87.5, "count": 3}
//
// key, metric and value are required; ts is unix milliseconds (an integer) or an RFC 3339
// string ("2026-11-30T08:00:00.123Z", "…+02:00"), and defaults to the caller's default
// (the Kafka record's timestamp, or the request time over HTTP); count is an integer ≥ 1,
// default 1. Other fields are ignored. Field names match exactly (unlike encoding/json's
// case-insensitive struct matching) and the last of duplicate fields wins. Strings are
// unescaped as encoding/json does, invalid UTF-8 replaced by U+FFFD, except in key and
// metric: keys are bytes, so a key or metric that is not valid UTF-8 (or escapes a lone
// surrogate) is refused as ReasonBadField rather than rewritten. As a courtesy to
// producers that write them (Python's json module does), the bare tokens NaN, Infinity and
// -Infinity as the value are refused as ReasonInvalidValue rather than ReasonInvalidJSON.
//
// It is a hand-written single-pass parser for this one schema, checked against encoding/json
// by a differential test and a fuzz target. Decoding allocates nothing once the event's key
// and metric strings are in the decoder's intern table.
//
// A Decoder is not safe for concurrent use: keep one per goroutine (a consumer keeps one per
// partition; an HTTP handler can take them from a sync.Pool). The zero value is not usable;
// call NewDecoder.
type Decoder struct {
	maxKey      int
	maxInterned int
	intern      map[string]string
	lastMetric  string // the metric of the previous event, a one-entry cache in front of intern
	scratch     []byte // unescaped strings
	stack       []byte // open containers while skipping a nested unknown field
	f           [numFields + 1]span
}

// NewDecoder returns a Decoder, or the config's error.
func NewDecoder(cfg DecoderConfig) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("decoder config: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Decoder{
		maxKey:      cfg.MaxKeyLen,
		maxInterned: cfg.MaxInterned,
		intern:      make(map[string]string, 256),
	}, nil
}

// Decode parses one JSON object into an event. defaultTS (unix ms) is used when ts is
// absent or null. On success the event has Partition −1 and the reason is ReasonNone;
// otherwise the event is the zero Event with Partition −1 and the reason says why.
// Store-level checks (late, future, series cap) are the store's: see ReasonOf.
func (d *Decoder) Decode(line []byte, defaultTS int64) (window.Event, Reason) {
	d.f = [numFields + 1]span{}
	if !d.parseObject(line) {
		return window.Event{}, ReasonInvalidJSON
	}
	ev := window.Event{TS: defaultTS, Count: 1}
	if r := d.event(line, &ev); r != ReasonNone {
		return window.Event{}, r
	}
	return ev, ReasonNone
}

// DecodeLines decodes NDJSON: it calls fn once for each line of data that is not blank
// (only spaces, tabs or carriage returns), with the line, the decoded event and the reason
// as Decode returns them, and returns how many lines it decoded. A record holding a single
// JSON object on one line is the one-line case. fn must not retain line or data.
func (d *Decoder) DecodeLines(data []byte, defaultTS int64, fn func(line []byte, ev window.Event, r Reason)) int {
	n := 0
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if skipWS(line, 0) == len(line) {
			continue
		}
		ev, r := d.Decode(line, defaultTS)
		fn(line, ev, r)
		n++
	}
	return n
}

// The fields the decoder keeps; every other field is validated and skipped.
const (
	fKey = iota
	fMetric
	fValue
	fTS
	fCount
	numFields
	fOther = numFields // d.f's last entry is a sink for the fields we skip
)

type tokKind uint8

const (
	tokAbsent tokKind = iota
	tokNull
	tokString
	tokNumber
	tokNaN   // NaN, Infinity, -Infinity: only legal (and then refused) as the value
	tokOther // true, false, object, array
)

// span locates a field's value in the input: a string's contents without quotes, or a
// number's literal. Offsets are int32: Decode refuses lines of 2 GiB or more.
type span struct {
	start, end int32
	kind       tokKind
	escaped    bool // string: has backslash escapes or non-ASCII bytes, so it needs unquote
	integer    bool // number: no fraction and no exponent
}

// plainByte marks the bytes a JSON string can hold as they are: printable ASCII but '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// parseObject validates b as one JSON object (surrounded by optional whitespace) and
// records the spans of the known fields in d.f. It is the hot loop: names and values are
// scanned in place, numbers are converted later and only for the fields that are kept.
func (d *Decoder) parseObject(b []byte) bool {
	if len(b) >= math.MaxInt32 {
		return false
	}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	nan := false // a NaN token is tolerated only as the value that decides the event
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		j, esc := scanString(b, i+1)
		if j < 0 {
			return false
		}
		name := b[i+1 : j]
		if esc {
			name, _ = d.unquote(name)
		}
		sp := &d.f[fieldOf(name)]
		i = skipWS(b, j+1)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		if i = skipWS(b, i+1); i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			j, esc := scanString(b, i+1)
			if j < 0 {
				return false
			}
			*sp = span{start: int32(i + 1), end: int32(j), kind: tokString, escaped: esc}
			i = j + 1
		case c == '-' && i+1 < len(b) && b[i+1] == 'I':
			if i = literal(b, i, "-Infinity"); i < 0 {
				return false
			}
			*sp, nan = span{kind: tokNaN}, true
		case c == '-' || isDigit(c):
			j, integer := scanNumber(b, i)
			if j < 0 {
				return false
			}
			*sp = span{start: int32(i), end: int32(j), kind: tokNumber, integer: integer}
			i = j
		case c == 'n':
			if i = literal(b, i, "null"); i < 0 {
				return false
			}
			*sp = span{kind: tokNull}
		case c == 'N' || c == 'I':
			lit := "NaN"
			if c == 'I' {
				lit = "Infinity"
			}
			if i = literal(b, i, lit); i < 0 {
				return false
			}
			*sp, nan = span{kind: tokNaN}, true
		default:
			if i = d.skipValue(b, i); i < 0 {
				return false
			}
			*sp = span{kind: tokOther}
		}
		if i = skipWS(b, i); i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			// NaN anywhere but in the deciding value is not JSON.
			return skipWS(b, i+1) == len(b) && (!nan || d.f[fValue].kind == tokNaN) && d.f[fOther].kind != tokNaN
		default:
			return false
		}
	}
}

// fieldOf names the field called name (unescaped).
func fieldOf(name []byte) int {
	switch len(name) { // by length first: most names are rejected without comparing bytes
	case 2:
		if name[0] == 't' && name[1] == 's' {
			return fTS
		}
	case 3:
		if string(name) == "key" {
			return fKey
		}
	case 5:
		switch string(name) {
		case "value":
			return fValue
		case "count":
			return fCount
		}
	case 6:
		if string(name) == "metric" {
			return fMetric
		}
	}
	return fOther
}

// scanString validates the string whose contents start at b[i] and returns the index of
// its closing quote (or −1) and whether it has escapes or non-ASCII bytes.
func scanString(b []byte, i int) (int, bool) {
	esc := false
	for {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1, false
		}
		switch c := b[i]; {
		case c == '"':
			return i, esc
		case c == '\\':
			esc = true
			i++
			if i >= len(b) {
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
		case c < 0x20:
			return -1, false // control characters must be escaped
		default: // non-ASCII: unquote checks the UTF-8
			esc = true
			i++
		}
	}
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

// literal matches lit at b[i] and returns the index after it, or −1.
func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber validates the JSON number at b[i] and returns the index after it (or −1) and
// whether it is an integer literal.
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
		if i >= len(b) {
			return -1, false
		}
	}
	switch {
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return -1, false
	}
	integer := true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, integer
}

// skipValue validates the JSON value at b[i] (true, false, an object or an array; the
// other kinds are handled inline by parseObject but accepted here too) without recursion,
// holding the open containers in d.stack, and returns the index after it or −1. The event
// object itself is one level of nesting.
func (d *Decoder) skipValue(b []byte, i int) int {
	stack := d.stack[:0]
	defer func() { d.stack = stack[:0] }()
	for {
		// i is at the start of a value.
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			stack = append(stack, c)
			if len(stack) >= maxNestingDepth {
				return -1
			}
			if i = skipWS(b, i+1); i >= len(b) {
				return -1
			}
			if (c == '{' && b[i] == '}') || (c == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				break // an empty container is a finished value
			}
			if c == '{' {
				if i = memberName(b, i); i < 0 {
					return -1
				}
			}
			continue // the first value inside
		case c == '"':
			j, _ := scanString(b, i+1)
			if j < 0 {
				return -1
			}
			i = j + 1
		case c == '-' || isDigit(c):
			if i, _ = scanNumber(b, i); i < 0 {
				return -1
			}
		case c == 't':
			i = literal(b, i, "true")
		case c == 'f':
			i = literal(b, i, "false")
		case c == 'n':
			i = literal(b, i, "null")
		default:
			return -1
		}
		if i < 0 {
			return -1
		}
		// A value ended at i: close containers until one continues with another value.
		for {
			if len(stack) == 0 {
				return i
			}
			if i = skipWS(b, i); i >= len(b) {
				return -1
			}
			top := stack[len(stack)-1]
			if (top == '{' && b[i] == '}') || (top == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return -1
			}
			i = skipWS(b, i+1)
			if top == '{' {
				if i = memberName(b, i); i < 0 {
					return -1
				}
			}
			break
		}
	}
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
	if i = skipWS(b, j+1); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipWS(b, i+1)
}

// event interprets the recorded fields, in the order key, metric, value, ts, count.
// ev arrives with the defaults filled in.
func (d *Decoder) event(b []byte, ev *window.Event) Reason {
	var r Reason
	if ev.Key, r = d.name(b, d.f[fKey], false); r != ReasonNone {
		return r
	}
	if ev.Metric, r = d.name(b, d.f[fMetric], true); r != ReasonNone {
		return r
	}
	switch v := d.f[fValue]; v.kind {
	case tokAbsent, tokNull:
		return ReasonMissingField
	case tokNaN:
		return ReasonInvalidValue
	case tokNumber:
		f, ok := parseFloat(b[v.start:v.end])
		if !ok {
			return ReasonInvalidValue
		}
		ev.Value = f
	default:
		return ReasonBadField
	}
	switch t := d.f[fTS]; t.kind {
	case tokAbsent, tokNull:
	case tokNumber:
		ms, ok := parseInt64(b[t.start:t.end], t.integer)
		if !ok {
			return ReasonBadField
		}
		ev.TS = ms
	case tokString:
		s := b[t.start:t.end]
		if t.escaped {
			s, _ = d.unquote(s)
		}
		ms, ok := rfc3339.Millis(s)
		if !ok {
			return ReasonBadField
		}
		ev.TS = ms
	default:
		return ReasonBadField
	}
	switch c := d.f[fCount]; c.kind {
	case tokAbsent, tokNull:
	case tokNumber:
		n, ok := parseUint64(b[c.start:c.end], c.integer)
		if !ok || n == 0 {
			return ReasonBadField
		}
		ev.Count = n
	default:
		return ReasonBadField
	}
	return ReasonNone
}

// name decodes the key or metric field: present, a string, not empty, not too long, and
// free of control characters.
func (d *Decoder) name(b []byte, sp span, metric bool) (string, Reason) {
	switch sp.kind {
	case tokAbsent, tokNull:
		return "", ReasonMissingField
	case tokString:
	default:
		return "", ReasonBadField
	}
	s := b[sp.start:sp.end]
	if sp.escaped {
		var lossy bool
		if s, lossy = d.unquote(s); lossy {
			return "", ReasonBadField // keys are bytes: never rewritten to U+FFFD
		}
	}
	switch {
	case len(s) == 0:
		return "", ReasonMissingField
	case len(s) > d.maxKey:
		return "", ReasonKeyTooLong
	}
	if metric && string(s) == d.lastMetric { // most lines repeat the previous metric: skip the map
		return d.lastMetric, ReasonNone
	}
	v, ok := d.intern[string(s)] // map lookup with string(b) does not allocate
	if !ok {
		// A name seen for the first time: valid UTF-8 (keys are bytes: "t\xff" and "t\xfe"
		// are two keys, and rewriting both to U+FFFD would merge them) without control
		// characters (NUL, newline, DEL: the store joins metric and key with a NUL, and the
		// limiter refuses such keys), checked once, since only checked names enter the table.
		if hasControl(s) || !utf8.Valid(s) {
			return "", ReasonBadField
		}
		v = d.internNew(s)
	}
	if metric {
		d.lastMetric = v
	}
	return v, ReasonNone
}

// hasControl reports a byte below 0x20 or DEL, as limiter.ValidateKey refuses.
func hasControl(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// internNew adds s, not yet in the table, and returns it as a string.
func (d *Decoder) internNew(s []byte) string {
	if len(d.intern) >= d.maxInterned {
		clear(d.intern) // a bounded table: a flood of unique keys costs allocations, not memory
	}
	v := string(s)
	d.intern[v] = v
	return v
}

// unquote unescapes the contents of a validated JSON string into d.scratch exactly as
// encoding/json does (invalid UTF-8 and lone surrogates become U+FFFD); lossy reports that
// it replaced something. The result is valid until the next call.
func (d *Decoder) unquote(s []byte) (out []byte, lossy bool) {
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s, false
	}
	out = d.scratch[:0]
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
	d.scratch = out
	return out, lossy
}

// pow10 holds the powers of ten a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat converts a validated JSON number literal. The fast path is Clinger's: a
// mantissa below 2^53 times an exact power of ten up to 10^22 is one correctly rounded
// IEEE operation, so it agrees bit for bit with strconv.ParseFloat, which handles the rest.
// ok is false when the number overflows float64.
func parseFloat(s []byte) (float64, bool) {
	i, neg := 0, false
	if s[0] == '-' {
		neg, i = true, 1
	}
	var mant uint64
	exp, digits := 0, 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		mant = mant*10 + uint64(s[i]-'0')
		if mant != 0 {
			digits++
		}
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			mant = mant*10 + uint64(s[i]-'0')
			exp--
			if mant != 0 {
				digits++
			}
		}
	}
	if digits > 15 || (i < len(s) && !parseExp(s[i:], &exp)) {
		return slowFloat(s)
	}
	if mant == 0 {
		if neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	if mant >= 1<<53 || exp < -22 || exp > 22 {
		return slowFloat(s)
	}
	f := float64(mant)
	if exp < 0 {
		f /= pow10[-exp]
	} else {
		f *= pow10[exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// parseExp adds the exponent part s ("e-3", "E+10") to *exp, refusing big ones (slow path).
func parseExp(s []byte, exp *int) bool {
	i, neg := 1, false
	if s[i] == '+' || s[i] == '-' {
		neg = s[i] == '-'
		i++
	}
	e := 0
	for ; i < len(s); i++ {
		e = e*10 + int(s[i]-'0')
		if e > 1000 {
			return false
		}
	}
	if neg {
		e = -e
	}
	*exp += e
	return true
}

func slowFloat(s []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(s), 64)
	return f, err == nil
}

// parseInt64 converts an integer literal as encoding/json does into an int64: no fraction,
// no exponent, within range.
func parseInt64(s []byte, integer bool) (int64, bool) {
	if !integer {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var u uint64
	for _, c := range s {
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to itself, the minimum
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	}
	return 0, false
}

// parseUint64 converts a non-negative integer literal as encoding/json does into a uint64.
func parseUint64(s []byte, integer bool) (uint64, bool) {
	if !integer || s[0] == '-' {
		return 0, false
	}
	var u uint64
	for _, c := range s {
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	return u, true
}
