package event

import (
	"bytes"
	"math"
	"slices"
	"strings"

	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// A MapDecoder reads a line in one walk over its members (map_scan.go), each field a Map names
// recorded where it lies; every other member is validated and skipped by the scanner, so a
// line that is not JSON is refused as slide's own events are. Then each of the map's metrics
// is one event, its key, value, time and labels converted from the recorded fields by the
// rules of the package doc, through a Decoder's own readers: its name checks and intern table
// (a key or series string it has seen allocates nothing), and window's series encoding. The
// metrics of a line that share a key and labels share its series string, those that share a
// time field its time, each read once a line.

// MapDecoder decodes JSON lines into events by a Map. Like a Decoder it is not safe for
// concurrent use: keep one per goroutine. The zero value is not usable; call NewMapDecoder.
type MapDecoder struct {
	d     *Decoder // the rules: names, interning, labels
	ms    []mapMetric
	root  *mapNode
	paths []string          // the fields, by leaf
	vals  []textparse.Value // the line's value of each field, by leaf
	keys  []string          // each metric's key or series string, for a metric that shares another's (sameAs)
	times []int64           // each metric's time, for a metric that shares another's (sameTS), when timed
	timed []bool
	ser   []byte // the series string being written
	bad   mapBad // why the last metric refused was refused, for Explain
}

// mapMetric is a MapMetric compiled: its fields as leaves of the tree.
type mapMetric struct {
	metric     string
	ts, value  int // leaves; ts −1 for none
	key        int
	unit       int // MapTS.Unit as a power of ten to ms
	scale      float64
	keyDefault string
	labels     []mapLabel // sorted by name
	sameAs     int        // an earlier metric with the same key and labels, whose series this one reuses; −1
	sameTS     int        // an earlier metric with the same ts field and unit, whose time this one reuses; −1
	trace      int        // leaves of MapTrace's fields; −1 for none
	span       int
}

type mapLabel struct {
	name string
	sep  []byte // 0xFF name =, what precedes its value in a series string
	leaf int
}

// NewMapDecoder returns a decoder of lines by m, whose names follow cfg, or the error of m or
// cfg.
func NewMapDecoder(m Map, cfg Config) (*MapDecoder, error) {
	d, err := NewDecoder(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.validate(d.maxKey); err != nil {
		return nil, err
	}
	md := &MapDecoder{d: d, root: &mapNode{}}
	leaf := func(path string) int {
		if i := slices.Index(md.paths, path); i >= 0 {
			return i
		}
		md.paths = append(md.paths, path)
		md.root.add(strings.Split(path, "."), len(md.paths)-1)
		return len(md.paths) - 1
	}
	for i, mm := range m.Metrics {
		c := mapMetric{
			metric: mm.Metric, ts: -1, value: leaf(mm.Value.Field), key: leaf(mm.Key.Field),
			unit: mapUnits[mm.TS.Unit], scale: mm.Value.Scale, keyDefault: mm.Key.Default, sameAs: -1, sameTS: -1,
			trace: -1, span: -1,
		}
		if mm.TS.Field != "" {
			c.ts = leaf(mm.TS.Field)
		}
		if mm.Trace.Field != "" {
			c.trace = leaf(mm.Trace.Field)
		}
		if mm.Trace.Span != "" {
			c.span = leaf(mm.Trace.Span)
		}
		if c.scale == 0 {
			c.scale = 1
		}
		for _, l := range mm.Labels {
			c.labels = append(c.labels, mapLabel{name: l.Name, sep: append(append([]byte{window.LabelSep}, l.Name...), '='), leaf: leaf(l.Field)})
		}
		slices.SortFunc(c.labels, func(a, b mapLabel) int { return strings.Compare(a.name, b.name) })
		for j := i - 1; j >= 0; j-- { // the first such metric: it is never one that shares
			p := &md.ms[j]
			if p.key == c.key && p.keyDefault == c.keyDefault && slices.EqualFunc(p.labels, c.labels, func(a, b mapLabel) bool { return a.name == b.name && a.leaf == b.leaf }) {
				c.sameAs = j
			}
			if p.ts == c.ts && p.unit == c.unit && c.ts >= 0 {
				c.sameTS = j
			}
		}
		md.ms = append(md.ms, c)
	}
	if err := md.root.check(); err != nil {
		return nil, err
	}
	md.root.compile()
	md.vals = make([]textparse.Value, len(md.paths))
	md.keys = make([]string, len(md.ms))
	md.times, md.timed = make([]int64, len(md.ms)), make([]bool, len(md.ms))
	return md, nil
}

// DecodeLines decodes NDJSON by the map: for each line of data that is not blank it calls fn
// once per metric of the map, with the line and that metric's event and reason (once, with
// ReasonInvalidJSON, for a line that is not one JSON object), and returns how many events it
// gave fn. fn must not retain line or data.
func (md *MapDecoder) DecodeLines(data []byte, defaultTS int64, fn func(line []byte, ev window.Event, r Reason)) int {
	n := 0
	for line, rest, ok := nextLine(data); ok; line, rest, ok = nextLine(rest) {
		if !md.scan(line) {
			fn(line, window.Event{}, ReasonInvalidJSON)
			n++
			continue
		}
		for i := range md.ms {
			ev, r := md.event(line, i, defaultTS)
			fn(line, ev, r)
		}
		n += len(md.ms)
	}
	return n
}

// scan records the map's fields of line in md.vals, or reports that line is not one object.
func (md *MapDecoder) scan(line []byte) bool {
	clear(md.vals)
	return len(line) < math.MaxInt32 && md.root.resolve(line, 0, len(line), md.vals)
}

// mapBad is why a metric's event was refused: the step (what) and the leaf or label it read.
type mapBad struct {
	metric int
	what   mapWhat
	leaf   int
	label  string
}

type mapWhat uint8

const (
	badKey mapWhat = iota + 1
	badValue
	badTS
	badLabel
)

// event converts the recorded fields into metric i's event.
func (md *MapDecoder) event(line []byte, i int, defaultTS int64) (window.Event, Reason) {
	m := &md.ms[i]
	ev := window.Event{Metric: m.metric, TS: defaultTS, Count: 1}
	md.timed[i] = false // (before any refusal: a later metric must not take a time of the line before)
	var r Reason
	if m.sameAs >= 0 && md.keys[m.sameAs] != "" {
		ev.Key = md.keys[m.sameAs]
	} else if k, ok := md.knownSeries(line, m); ok {
		ev.Key, md.keys[i] = k, k
	} else {
		md.keys[i] = ""
		if ev.Key, r = md.key(line, m); r != ReasonNone {
			return md.refuse(i, badKey, m.key, "", r)
		}
		if len(m.labels) > 0 {
			ser := append(md.ser[:0], ev.Key...)
			for _, lb := range m.labels {
				if ser, r = appendLabel(ser, line, lb.sep, md.vals[lb.leaf]); r != ReasonNone {
					md.ser = ser
					return md.refuse(i, badLabel, lb.leaf, lb.name, r)
				}
			}
			if md.ser = ser; len(ser) > len(ev.Key) {
				ev.Key = md.d.internSeries(ser)
			}
		}
		md.keys[i] = ev.Key
	}
	if ev.Value, r = md.value(line, md.vals[m.value], m.scale); r != ReasonNone {
		return md.refuse(i, badValue, m.value, "", r)
	}
	switch {
	case m.sameTS >= 0 && md.timed[m.sameTS]:
		ev.TS = md.times[m.sameTS]
	case m.ts >= 0:
		if ev.TS, r = md.ts(line, md.vals[m.ts], m.unit, defaultTS); r != ReasonNone {
			return md.refuse(i, badTS, m.ts, "", r)
		}
		md.times[i], md.timed[i] = ev.TS, true
	}
	if m.trace >= 0 {
		md.traceIDs(line, m, &ev)
	}
	return ev, ReasonNone
}

// knownSeries is the series string of metric m's key and labels when the line gives them as
// plain text (no escape, no byte beyond ASCII, a key not empty) and the decoder's intern
// table holds it: then its key and label values passed the rules when it entered the table
// (only checked strings enter), and need no check now. Plain text holds no 0xFF, so the
// labels' boundaries are the map's, and a string that breaks a rule is never found.
func (md *MapDecoder) knownSeries(line []byte, m *mapMetric) (string, bool) {
	kv := md.vals[m.key]
	if len(m.labels) == 0 || kv.Kind != textparse.String || kv.Escaped || kv.End == kv.Start {
		return "", false
	}
	ser := append(md.ser[:0], kv.Bytes(line)...)
	for _, lb := range m.labels {
		switch v := md.vals[lb.leaf]; v.Kind {
		case textparse.Absent, textparse.Null:
		case textparse.String, textparse.Number, textparse.True, textparse.False:
			if v.Escaped {
				md.ser = ser
				return "", false
			}
			if v.End > v.Start {
				ser = append(ser, lb.sep...)
				ser = append(ser, v.Bytes(line)...)
			}
		default:
			md.ser = ser
			return "", false
		}
	}
	md.ser = ser
	s, _, ok := md.d.intern.lookup(ser)
	return s, ok
}

// refuse records why metric i was refused and returns its reason.
func (md *MapDecoder) refuse(i int, what mapWhat, leaf int, label string, r Reason) (window.Event, Reason) {
	md.bad = mapBad{metric: i, what: what, leaf: leaf, label: label}
	if what == badKey || what == badLabel {
		md.keys[i] = ""
	}
	return window.Event{}, r
}

// key reads metric m's key: a string by the key rule (Decoder.Name), a number or a boolean
// as its text, the default for absent, null or "".
func (md *MapDecoder) key(line []byte, m *mapMetric) (string, Reason) {
	v := md.vals[m.key]
	switch v.Kind {
	case textparse.Absent, textparse.Null:
		if m.keyDefault != "" {
			return m.keyDefault, ReasonNone
		}
		return "", ReasonMissingField
	case textparse.String:
		if v.Start == v.End && m.keyDefault != "" {
			return m.keyDefault, ReasonNone
		}
		return md.d.name(line, v, false)
	case textparse.Number, textparse.True, textparse.False:
		return md.text(v.Bytes(line))
	}
	return "", ReasonBadField
}

// text interns s, a JSON literal's text (a number, true or false: ASCII without controls)
// as a key.
func (md *MapDecoder) text(s []byte) (string, Reason) {
	d := md.d
	if r := d.nameLen(len(s)); r != ReasonNone {
		return "", r
	}
	v, h, ok := d.intern.lookup(s)
	if !ok || window.HasLabels(v) {
		v = d.intern.add(s, h)
	}
	return v, ReasonNone
}

// appendLabel appends to ser, a series string being written, the label whose separator and
// name (0xFF name =, window's encoding) are sep and whose value v is, by the label rules of
// events: a string's value (never rewritten to U+FFFD, at most window.MaxLabelValueLen bytes,
// window.ValidName), a number's or a boolean's text; absent, null or empty is no label. The
// map's labels are sorted by name, so the string is window.AppendSeries' own.
func appendLabel(ser, line, sep []byte, v textparse.Value) ([]byte, Reason) {
	switch v.Kind {
	case textparse.Absent, textparse.Null:
		return ser, ReasonNone
	case textparse.String, textparse.Number, textparse.True, textparse.False:
	default:
		return ser, ReasonBadField
	}
	mark := len(ser)
	ser = append(ser, sep...)
	at := len(ser)
	s := v.Bytes(line)
	if v.Escaped {
		var lossy bool
		if ser, lossy = textparse.Unquote(ser, s); lossy {
			return ser[:mark], ReasonBadField
		}
	} else {
		ser = append(ser, s...)
	}
	val := ser[at:]
	switch {
	case len(val) == 0:
		return ser[:mark], ReasonNone
	case len(val) > window.MaxLabelValueLen:
		return ser[:mark], ReasonKeyTooLong
	case v.Kind == textparse.String && !window.ValidNameBytes(val):
		return ser[:mark], ReasonBadField
	}
	return ser, ReasonNone
}

// value reads a value: a JSON number, or a string holding one, times scale.
func (md *MapDecoder) value(line []byte, v textparse.Value, scale float64) (float64, Reason) {
	var f float64
	switch v.Kind {
	case textparse.Absent, textparse.Null:
		return 0, ReasonMissingField
	case textparse.Number:
		var err error
		if f, err = textparse.ParseFloat(v.Bytes(line)); err != nil {
			return 0, ReasonInvalidValue // beyond float64
		}
	case textparse.String:
		s := v.Bytes(line)
		if v.Escaped || len(s) == 0 {
			return 0, ReasonBadField // a number's text has no escape and no byte beyond ASCII
		}
		var end int
		if f, end = textparse.Float(s, 0); end != len(s) {
			if numberText(s) {
				return 0, ReasonInvalidValue // a number's text, beyond float64
			}
			return 0, ReasonBadField
		}
	default:
		return 0, ReasonBadField
	}
	if f *= scale; math.IsInf(f, 0) {
		return 0, ReasonInvalidValue
	}
	return f, ReasonNone
}

// numberText reports that s is a JSON number's text.
func numberText(s []byte) bool {
	var sc textparse.Scanner
	return len(s) > 0 && (s[0] == '-' || s[0]-'0' < 10) && sc.SkipValue(s, 0) == len(s)
}

// ts reads a time: RFC 3339 text, or a number (or a number's text) of unit, a power of ten
// to milliseconds; absent or null is def.
func (md *MapDecoder) ts(line []byte, v textparse.Value, unit int, def int64) (int64, Reason) {
	switch v.Kind {
	case textparse.Absent, textparse.Null:
		return def, ReasonNone
	case textparse.Number:
		if ms, ok := unitMillis(v.Bytes(line), unit); ok {
			return ms, ReasonNone
		}
	case textparse.String:
		s := v.Bytes(line)
		if v.Escaped {
			s, _ = md.d.unquote(s)
		}
		if ms, ok := textparse.RFC3339Millis(s); ok {
			return ms, ReasonNone
		}
		if numberText(s) {
			if ms, ok := unitMillis(s, unit); ok {
				return ms, ReasonNone
			}
		}
	}
	return 0, ReasonBadField
}

// unitMillis converts the JSON number s, a count of 10^−unit ms (unit 3: seconds, −6:
// nanoseconds), to unix milliseconds, exactly: its digits shifted by unit, what falls below
// the millisecond dropped toward the past. An exponent or a result beyond ±2^53 (a quarter of
// a million years) is refused.
func unitMillis(s []byte, unit int) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if bytes.IndexAny(s, "eE") >= 0 {
		return 0, false
	}
	ip, fp, _ := bytes.Cut(s, []byte{'.'})
	at := func(k int) byte { // digit k of ip and fp run together, '0' past them
		switch {
		case k < len(ip):
			return ip[k]
		case k-len(ip) < len(fp):
			return fp[k-len(ip)]
		}
		return '0'
	}
	keep := len(ip) + unit // the digits of milliseconds and more
	var v uint64
	for k := range keep {
		if v > 1<<53 {
			return 0, false
		}
		v = v*10 + uint64(at(k)-'0')
	}
	if v > 1<<53 {
		return 0, false
	}
	exact := true
	for k := max(keep, 0); k < len(ip)+len(fp); k++ {
		exact = exact && at(k) == '0'
	}
	ms := int64(v)
	if neg {
		ms = -ms
		if !exact {
			ms--
		}
	}
	return ms, true
}

// internSeries returns the interned copy of the series string s.
func (d *Decoder) internSeries(s []byte) string {
	v, h, ok := d.intern.lookup(s)
	if !ok {
		v = d.intern.add(s, h)
	}
	return v
}
