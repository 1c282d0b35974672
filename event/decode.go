package event

import (
	"bytes"
	"fmt"

	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// Decoder defaults.
const (
	DefaultMaxKeyLen   = window.DefaultMaxNameLen // bytes of a decoded key or metric name (256)
	DefaultMaxInterned = 1 << 16                  // distinct keys, metrics and series strings a Decoder keeps
)

// maxNestingDepth is encoding/json's limit on nested objects and arrays, which the scanner
// keeps so that the two decoders agree on which inputs are JSON.
const maxNestingDepth = textparse.MaxNesting

// Config configures a Decoder. The zero value means the defaults.
type Config struct {
	// MaxKeyLen is the longest key or metric name accepted, in bytes after unescaping;
	// longer ones are refused with ReasonKeyTooLong. Default DefaultMaxKeyLen (256).
	MaxKeyLen int
	// MaxInterned bounds the decoder's table of key, metric and series strings (those of
	// events with labels). Decoding an event whose strings are in the table allocates
	// nothing; when the table is full it is cleared and refills. Default
	// DefaultMaxInterned (65,536).
	MaxInterned int
}

// Validate reports a config NewDecoder would refuse.
func (c Config) Validate() error {
	if c.MaxKeyLen < 0 {
		return fmt.Errorf("max key length %d: must not be negative", c.MaxKeyLen)
	}
	if c.MaxInterned < 0 {
		return fmt.Errorf("max interned %d: must not be negative", c.MaxInterned)
	}
	return nil
}

func (c Config) withDefaults() Config {
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
// default 1; labels is an optional object of string values ({"route":"/pay","code":"200"}),
// which makes the event's Key its series string (window.AppendSeries); trace_id and span_id
// are the optional trace context of an exemplar (below). Other fields are ignored. Field
// names match exactly (unlike encoding/json's case-insensitive struct matching), and a line
// giving one of the eight twice is refused as ReasonBadField (encoding/json would take the
// last; POST /v1/allow refuses it too). Strings are unescaped as encoding/json
// does, invalid UTF-8 replaced by U+FFFD, except in key, metric and label values: keys are
// bytes, so a key, metric or label value that is not valid UTF-8 (or escapes a lone
// surrogate) is refused as ReasonBadField rather than rewritten, as is one holding a C0 or
// C1 control, DEL or a bidi override or isolate, escaped or not (window.ValidName). As a
// courtesy to producers that write them (Python's json module does), the bare tokens NaN,
// Infinity and -Infinity as the value are refused as ReasonInvalidValue rather than
// ReasonInvalidJSON.
//
// trace_id and span_id fill the event's TraceID and SpanID, which a store keeping exemplars
// (window.StoreConfig.Exemplars) links the slot's slowest event to:
//
//	{"key":"tenant-42","metric":"latency_ms","value":87.5,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}
//
// trace_id is a string of 32 hex digits, as W3C Trace Context and OTLP/JSON write a trace
// id, or of 16, a 64-bit id as Zipkin and Jaeger write it, which is the last 8 bytes of
// TraceID as the span decoders place it; span_id a string of 16; either case, escapes
// unescaped as encoding/json does. Absent, null or "" is no id. The ids never refuse an
// event (a malformed trace context must not lose its metric): an id that is not a string,
// not hex of those lengths, or all zeros, in either member, gives the event no ids at all;
// a span_id without a valid trace_id gives none, and a trace_id without a span_id gives
// the trace id alone. Given twice, either is ReasonBadField, as every known field is.
//
// The common layouts, extra members among them, take a one-pass fast path (decode_fast.go);
// every other line, and every refusal, is decided by textparse's scanner with this one
// schema's checks, from the line's start or from the last member a fast path read, held to
// encoding/json by a differential test and a fuzz target, the fast paths held to it by
// another; timestamps follow textparse's one rule. Decoding allocates
// nothing once the event's key, metric and series strings are in the decoder's intern table.
//
// A Decoder is not safe for concurrent use: keep one per goroutine (a consumer keeps one per
// partition; an HTTP handler can take them from a sync.Pool). The zero value is not usable;
// call NewDecoder.
type Decoder struct {
	maxKey      int
	maxInterned int
	intern      internTable // decode_intern.go
	lastMetric  string      // the metric of the previous event, a one-entry cache in front of intern
	lastLo      uint64      // lastMetric's words16 when it is short and plain, for the fast path's compare
	lastHi      uint64
	lastN       int        // len(lastMetric) when it is short and plain, else −1
	lastQ       [2]uint64  // lastMetric and its closing quote as words, when it has at most 15 bytes
	lastQMask   [2]uint64  // which bytes of lastQ count: none when it has more
	scratch     []byte     // unescaped strings
	restAt      int        // where the scanner path goes on after a fast path gave up (0: from the start)
	restSeen    uint8      // the fields the fast path recorded in f
	dup         uint8      // the known fields the scanner path found given twice (1<<fKey, …)
	pre         prefixEnds // where exact's prefix members end, when it hands a line on
	sc          textparse.Scanner
	f           [numFields + 1]textparse.Value
	lab         labelScratch // the event's labels (decode_labels.go), after what every event uses
}

// NewDecoder returns a Decoder, or the config's error.
func NewDecoder(cfg Config) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("decoder config: %w", err)
	}
	cfg = cfg.withDefaults()
	d := &Decoder{
		maxKey:      cfg.MaxKeyLen,
		maxInterned: cfg.MaxInterned,
		intern:      newInternTable(cfg.MaxInterned),
		sc:          textparse.Scanner{AllowNaN: true}, // NaN as the value is refused by name
	}
	d.sc.SetNames(eventFields...)
	d.lastN = -1
	return d, nil
}

// Decode parses one JSON object into an event. defaultTS (unix ms) is used when ts is
// absent or null. On success the event has Partition −1 and the reason is ReasonNone;
// otherwise the event is the zero Event with Partition −1 and the reason says why.
// Store-level checks (late, future, series cap) are the store's: see ReasonOf.
func (d *Decoder) Decode(line []byte, defaultTS int64) (ev window.Event, r Reason) {
	switch d.exact(line, defaultTS, &ev) { // the common shapes, in one pass (decode_fast.go)
	case exactTook:
		return ev, ReasonNone
	case exactNo:
		if d.fast(line, defaultTS, &ev) {
			return ev, ReasonNone
		}
	}
	if d.restAt > 0 { // the fast paths read members before giving up: go on after them
		return d.rest(line, d.restAt, d.restSeen, defaultTS)
	}
	return d.decodeGeneral(line, defaultTS)
}

// rest is decodeGeneral for a line whose members up to b[at] a fast path read and recorded
// in d.f (those in seen, as the scanner would have recorded them): the scanner goes on from
// there, and the event and its refusal come from the same checks. Every byte before at is a
// valid opening and members, and held no NaN (the fast paths take none), so the answer is
// decodeGeneral's, which TestDecodeFastDifferential and FuzzDecodeFast check.
func (d *Decoder) rest(line []byte, at int, seen uint8, defaultTS int64) (window.Event, Reason) {
	for k := range numFields {
		if seen&(1<<k) == 0 {
			d.f[k] = textparse.Value{}
		}
	}
	d.f[fOther] = textparse.Value{}
	sc := &d.sc
	sc.Resume(line, at)
	sc.Into(d.f[:])
	nan := false
	d.dup = 0
	seen &= 1<<numFields - 1
	for sc.Next() {
		nan = nan || sc.Value.Kind == textparse.NaN
		d.noteField(&seen)
	}
	if !sc.Done() || (nan && d.f[fValue].Kind != textparse.NaN) || d.f[fOther].Kind == textparse.NaN {
		return window.Event{}, ReasonInvalidJSON
	}
	ev := window.Event{TS: defaultTS, Count: 1}
	if r := d.event(line, &ev); r != ReasonNone {
		return window.Event{}, r
	}
	return ev, ReasonNone
}

// decodeGeneral is Decode by the scanner, for every input: the fast path's fallback, and the
// one source of every refusal.
func (d *Decoder) decodeGeneral(line []byte, defaultTS int64) (window.Event, Reason) {
	d.f = [numFields + 1]textparse.Value{}
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
	for line, rest, ok := nextLine(data); ok; line, rest, ok = nextLine(rest) {
		ev, r := d.Decode(line, defaultTS)
		fn(line, ev, r)
		n++
	}
	return n
}

// nextLine cuts the first line of data that is not blank (only spaces, tabs or carriage
// returns) off it: the line, what follows it, and false when no such line is left. Every
// reader of NDJSON in the package walks its body with it.
func nextLine(data []byte) (line, rest []byte, ok bool) {
	for len(data) > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if textparse.SkipSpace(line, 0) != len(line) {
			return line, data, true
		}
	}
	return nil, nil, false
}

// The fields the decoder keeps; every other field is validated and skipped.
const (
	fKey = iota
	fMetric
	fValue
	fTS
	fCount
	fLabels
	fTraceID
	fSpanID
	numFields
	fOther = numFields // d.f's last entry is a sink for the fields we skip
)

// parseObject scans b as one JSON object (surrounded by optional whitespace) and records
// the values of the known fields in d.f, and in d.dup those given more than once. Numbers are
// converted later and only for the fields that are kept.
func (d *Decoder) parseObject(b []byte) bool {
	sc := &d.sc
	sc.Reset(b)
	nan := false    // a NaN token is tolerated only as the value that decides the event
	sc.Into(d.f[:]) // d.f[Field], in eventFields' order fKey … fLabels; fOther for the rest
	d.dup = 0
	var seen uint8
	for sc.Next() {
		nan = nan || sc.Value.Kind == textparse.NaN
		d.noteField(&seen)
	}
	// NaN anywhere but in the deciding value is not JSON.
	return sc.Done() && (!nan || d.f[fValue].Kind == textparse.NaN) && d.f[fOther].Kind != textparse.NaN
}

// noteField records the scanner's current member in seen, and in d.dup when seen had it: a
// known field given twice.
func (d *Decoder) noteField(seen *uint8) {
	if f := d.sc.Field; f >= 0 && f < numFields {
		bit := uint8(1) << f
		d.dup |= *seen & bit
		*seen |= bit
	}
}

// eventFields are the names of fKey … fSpanID, in that order.
var eventFields = []string{"key", "metric", "value", "ts", "count", "labels", "trace_id", "span_id"}

// event interprets the recorded fields, in the order key, metric, value, ts, count, labels,
// after refusing a line that gives one of them twice, and then the trace ids, which refuse
// nothing.
// ev arrives with the defaults filled in.
func (d *Decoder) event(b []byte, ev *window.Event) Reason {
	if d.dup != 0 { // which member counts would be a guess: refused, as /v1/allow refuses it
		return ReasonBadField
	}
	var r Reason
	if ev.Key, r = d.name(b, d.f[fKey], false); r != ReasonNone {
		return r
	}
	if ev.Metric, r = d.name(b, d.f[fMetric], true); r != ReasonNone {
		return r
	}
	switch v := d.f[fValue]; v.Kind {
	case textparse.Absent, textparse.Null:
		return ReasonMissingField
	case textparse.NaN:
		return ReasonInvalidValue
	case textparse.Number:
		f, err := textparse.ParseFloat(v.Bytes(b))
		if err != nil {
			return ReasonInvalidValue // out of float64's range
		}
		ev.Value = f
	default:
		return ReasonBadField
	}
	if ev.TS, r = d.TS(b, d.f[fTS], ev.TS); r != ReasonNone {
		return r
	}
	switch c := d.f[fCount]; c.Kind {
	case textparse.Absent, textparse.Null:
	case textparse.Number:
		n, ok := textparse.ParseUint(c.Bytes(b))
		if !ok || n == 0 {
			return ReasonBadField
		}
		ev.Count = n
	default:
		return ReasonBadField
	}
	switch l := d.f[fLabels]; l.Kind {
	case textparse.Absent, textparse.Null:
	case textparse.Object:
		if _, r = d.readLabels(l.Bytes(b)); r != ReasonNone {
			return r
		}
		ev.Key = d.seriesOf(ev.Key)
	default:
		return ReasonBadField
	}
	d.traceIDs(b, d.f[fTraceID], d.f[fSpanID], ev)
	return ReasonNone
}

// traceIDs sets ev's TraceID and SpanID from tv and sv, the trace_id and span_id members of
// line as the scanner records them, by the rule Decoder states: a trace id of 32 hex digits,
// or 16 right-aligned (hexID, the span decoders' reader), not all zero, and a span id of 16
// hex digits, not all zero, or none. Absent, null or "" is no id; anything else in either
// member leaves the event without ids, and never refuses it.
func (d *Decoder) traceIDs(line []byte, tv, sv textparse.Value, ev *window.Event) {
	var trace [16]byte
	t, ok := d.idText(line, tv)
	if !ok || len(t) != 32 && len(t) != 16 || !hexID(trace[:], t) || trace == [16]byte{} {
		return // (an absent trace id is the empty text: none)
	}
	var span [8]byte
	s, ok := d.idText(line, sv) // (t is read: the scratch may be reused)
	if !ok || len(s) != 0 && (len(s) != 16 || !hexID(span[:], s) || span == [8]byte{}) {
		return
	}
	ev.TraceID, ev.SpanID = trace, span
}

// idText is the text of v, an id member's value in line: a string's, unescaped into the
// decoder's scratch when it has escapes, or empty for absent or null; false for another type.
func (d *Decoder) idText(line []byte, v textparse.Value) ([]byte, bool) {
	switch v.Kind {
	case textparse.Absent, textparse.Null:
		return nil, true
	case textparse.String:
	default:
		return nil, false
	}
	s := v.Bytes(line)
	if v.Escaped {
		s, _ = d.unquote(s) // a lossy string holds U+FFFD: not hex
	}
	return s, true
}

// TS reads v, the value of a ts member of line as a textparse.Scanner recorded it, by the
// event's rule: unix milliseconds as a JSON integer, or RFC 3339 text in textparse's strict
// shape as a JSON string; absent or null is def. Anything else (a string of digits among
// them) is ReasonBadField. A format that carries an event's time among fields of its own
// reads it here (the backtest's request log does), so that it takes the times Decode takes.
func (d *Decoder) TS(line []byte, v textparse.Value, def int64) (int64, Reason) {
	switch v.Kind {
	case textparse.Absent, textparse.Null:
		return def, ReasonNone
	case textparse.Number: // unix ms: an integer literal, by textparse's rule
		if ms, ok := textparse.Millis(v.Bytes(line)); ok {
			return ms, ReasonNone
		}
	case textparse.String: // RFC 3339 text, by textparse's rule
		s := v.Bytes(line)
		if v.Escaped {
			s, _ = d.unquote(s)
		}
		if ms, ok := textparse.RFC3339Millis(s); ok {
			return ms, ReasonNone
		}
	}
	return 0, ReasonBadField
}

// Name reads v, the value of a key member of line as a textparse.Scanner recorded it, by the
// event's rule for a key or metric: a string (absent or null is ReasonMissingField, another
// type ReasonBadField) whose unescaped bytes pass CheckName, never rewritten to U+FFFD. The
// name is interned: one the decoder has seen allocates nothing.
func (d *Decoder) Name(line []byte, v textparse.Value) (string, Reason) {
	return d.name(line, v, false)
}

// CheckName holds s, a key or metric that arrived as text (a CSV field), to the rule Decode
// holds names to: ReasonMissingField when empty, ReasonKeyTooLong beyond Config.MaxKeyLen,
// ReasonBadField when window.ValidName refuses it; ReasonNone when it may name a series.
func (d *Decoder) CheckName(s string) Reason {
	if r := d.nameLen(len(s)); r != ReasonNone {
		return r
	}
	if !window.ValidName(s) {
		return ReasonBadField
	}
	return ReasonNone
}

// nameLen is CheckName's rule for a name's length.
func (d *Decoder) nameLen(n int) Reason {
	switch {
	case n == 0:
		return ReasonMissingField
	case n > d.maxKey:
		return ReasonKeyTooLong
	}
	return ReasonNone
}

// name decodes the key or metric field: present, a string, not empty, not too long, and a
// window.ValidName.
func (d *Decoder) name(b []byte, sp textparse.Value, metric bool) (string, Reason) {
	switch sp.Kind {
	case textparse.Absent, textparse.Null:
		return "", ReasonMissingField
	case textparse.String:
	default:
		return "", ReasonBadField
	}
	s := sp.Bytes(b)
	if sp.Escaped {
		var lossy bool
		if s, lossy = d.unquote(s); lossy {
			return "", ReasonBadField // keys are bytes: never rewritten to U+FFFD
		}
	}
	if r := d.nameLen(len(s)); r != ReasonNone {
		return "", r
	}
	if metric && string(s) == d.lastMetric { // most lines repeat the previous metric: skip the map
		return d.lastMetric, ReasonNone
	}
	v, h, ok := d.intern.lookup(s)
	if !ok || window.HasLabels(v) { // series strings share the table: a name holding 0xFF is not one
		// A name seen for the first time passes window.ValidName, the rule of every door:
		// valid UTF-8 (keys are bytes: "t\xff" and "t\xfe" are two keys, and rewriting both
		// to U+FFFD would merge them) without C0 or C1 controls, DEL or bidi overrides
		// (what a terminal, a log or a table would show as other text), checked once,
		// since only checked names enter the table.
		if !window.ValidNameBytes(s) {
			return "", ReasonBadField
		}
		v = d.intern.add(s, h)
	}
	if metric {
		d.setLastMetric(v)
	}
	return v, ReasonNone
}

// unquote unescapes a validated JSON string into d.scratch as encoding/json does; lossy
// reports a replacement by U+FFFD. The result is valid until the next call.
func (d *Decoder) unquote(s []byte) (out []byte, lossy bool) {
	out, lossy = textparse.Unquote(d.scratch[:0], s)
	d.scratch = out
	return out, lossy
}
