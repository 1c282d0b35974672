package event

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/slide-metrics/slide/window"
)

const defTS = int64(1764489600000) // 2025-11-30T08:00:00Z

func newTestDecoder(t testing.TB) *Decoder {
	t.Helper()
	d, err := NewDecoder(Config{MaxKeyLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDecode(t *testing.T) {
	ok := func(ts int64, key, metric string, v float64, n uint64) window.Event {
		return window.Event{TS: ts, Key: key, Metric: metric, Value: v, Count: n}
	}
	tests := []struct {
		in   string
		want window.Event
		r    Reason
	}{
		// The design's example.
		{`{"ts": 1764489600123, "key": "tenant-42", "metric": "latency_ms", "value": 87.5}`, ok(1764489600123, "tenant-42", "latency_ms", 87.5, 1), ReasonNone},
		{`{"key":"a","metric":"m","value":1}`, ok(defTS, "a", "m", 1, 1), ReasonNone},
		{` {"value":-2.5e3 , "metric":"m","key":"a","count":7, "extra":[1,{"x":null}]}` + "\r", ok(defTS, "a", "m", -2500, 7), ReasonNone},
		{`{"key":"a","metric":"m","value":1,"ts":"2025-11-30T08:00:00.123Z"}`, ok(1764489600123, "a", "m", 1, 1), ReasonNone},
		{`{"key":"a","metric":"m","value":1,"ts":"2025-11-30T10:00:00.1239+02:00"}`, ok(1764489600123, "a", "m", 1, 1), ReasonNone},
		{`{"key":"a","metric":"m","value":1,"ts":null,"count":null}`, ok(defTS, "a", "m", 1, 1), ReasonNone},
		{`{"key":"t\u00e9\"x","metric":"m","value":1}`, ok(defTS, "a", "m", 1, 1), ReasonNone}, // want.Key fixed below
		{`{"key":"a","key":"b","metric":"m","value":1}`, window.Event{}, ReasonBadField},       // which key? refused
		{`{"key":"a","metric":"m","value":1,"value":2}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":1,"k\u0065y":"a"}`, window.Event{}, ReasonBadField},             // the same name, escaped
		{`{"key":"a","metric":"m","value":1,"extra":1,"extra":2}`, ok(defTS, "a", "m", 1, 1), ReasonNone}, // skipped members may repeat
		{`{"k\u0065y":"a","metric":"m","value":1}`, ok(defTS, "a", "m", 1, 1), ReasonNone},
		{`{"key":"nbsp\u00a0 \u202f\u2065\u206a","metric":"m","value":1}`, ok(defTS, "nbsp\u00a0 \u202f\u2065\u206a", "m", 1, 1), ReasonNone}, // the neighbours of C1 and bidi
		// Refusals, one per reason.
		{`not json`, window.Event{}, ReasonInvalidJSON},
		{`{"key":"a","metric":"m","value":1`, window.Event{}, ReasonInvalidJSON},
		{`{"key":"a","metric":"m","value":1} x`, window.Event{}, ReasonInvalidJSON},
		{`[1]`, window.Event{}, ReasonInvalidJSON},
		{`{"key":"a","metric":"m","value":01}`, window.Event{}, ReasonInvalidJSON},
		{`{"key":"a","metric":"m","value":1,"x":NaN}`, window.Event{}, ReasonInvalidJSON},
		{`{"metric":"m","value":1}`, window.Event{}, ReasonMissingField},
		{`{"key":"","metric":"m","value":1}`, window.Event{}, ReasonMissingField},
		{`{"key":"a","metric":"m"}`, window.Event{}, ReasonMissingField},
		{`{"key":"a","metric":"m","value":null}`, window.Event{}, ReasonMissingField},
		{`{"key":7,"metric":"m","value":1}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":"1"}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m\u0000","value":1}`, window.Event{}, ReasonBadField},
		{`{"key":"a\nb","metric":"m","value":1}`, window.Event{}, ReasonBadField},
		{`{"key":"a\u007f","metric":"m","value":1}`, window.Event{}, ReasonBadField},
		{"{\"key\":\"a\x7f\",\"metric\":\"m\",\"value\":1}", window.Event{}, ReasonBadField},
		{`{"key":"tab\there","metric":"m","value":1}`, window.Event{}, ReasonBadField},
		{`{"key":"esc\u001b[31m","metric":"m","value":1}`, window.Event{}, ReasonBadField},
		{`{"key":"csi\u009b31m","metric":"m","value":1}`, window.Event{}, ReasonBadField},           // C1, escaped
		{"{\"key\":\"csi\u009b31m\",\"metric\":\"m\",\"value\":1}", window.Event{}, ReasonBadField}, // C1, raw UTF-8
		{`{"key":"a","metric":"m\u0080","value":1}`, window.Event{}, ReasonBadField},
		{`{"key":"rlo\u202ex","metric":"m","value":1}`, window.Event{}, ReasonBadField}, // bidi override
		{"{\"key\":\"lre\u202ax\",\"metric\":\"m\",\"value\":1}", window.Event{}, ReasonBadField},
		{`{"key":"lri\u2066x","metric":"m","value":1}`, window.Event{}, ReasonBadField}, // bidi isolate
		{"{\"key\":\"pdi\u2069x\",\"metric\":\"m\",\"value\":1}", window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":1,"ts":1.5}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":1,"ts":"yesterday"}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":1,"ts":"2025-02-29T00:00:00Z"}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":1,"count":0}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":1,"count":-1}`, window.Event{}, ReasonBadField},
		{`{"key":"a","metric":"m","value":NaN}`, window.Event{}, ReasonInvalidValue},
		{`{"key":"a","metric":"m","value":-Infinity}`, window.Event{}, ReasonInvalidValue},
		{`{"key":"a","metric":"m","value":1e400}`, window.Event{}, ReasonInvalidValue},
		{`{"key":"abcdefghijklmnopq","metric":"m","value":1}`, window.Event{}, ReasonKeyTooLong},
	}
	tests[6].want.Key = "té\"x"
	d := newTestDecoder(t)
	for _, tt := range tests {
		ev, r := d.Decode([]byte(tt.in), defTS)
		want := tt.want
		if r != tt.r || ev != want {
			t.Errorf("Decode(%s) = %+v, %v; want %+v, %v", tt.in, ev, r, want, tt.r)
		}
	}
}

func TestDecodeLines(t *testing.T) {
	d := newTestDecoder(t)
	in := "{\"key\":\"a\",\"metric\":\"m\",\"value\":1}\n\n  \r\nbad\n{\"key\":\"b\",\"metric\":\"m\",\"value\":2,\"count\":3}"
	var got []string
	n := d.DecodeLines([]byte(in), defTS, func(line []byte, ev window.Event, r Reason) {
		got = append(got, fmt.Sprintf("%s|%s|%s|%v|%d", line, r, ev.Key, ev.Value, ev.Count))
	})
	want := []string{
		`{"key":"a","metric":"m","value":1}|none|a|1|1`,
		`bad|invalid_json||0|0`,
		`{"key":"b","metric":"m","value":2,"count":3}|none|b|2|3`,
	}
	if n != 3 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("DecodeLines = %d\n%s\nwant 3\n%s", n, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecoderConfig(t *testing.T) {
	if _, err := NewDecoder(Config{MaxKeyLen: -1}); err == nil {
		t.Error("negative MaxKeyLen accepted")
	}
	if _, err := NewDecoder(Config{MaxInterned: -1}); err == nil {
		t.Error("negative MaxInterned accepted")
	}
	d, err := NewDecoder(Config{})
	if err != nil || d.maxKey != DefaultMaxKeyLen || d.maxInterned != DefaultMaxInterned {
		t.Fatalf("defaults: %v %d %d", err, d.maxKey, d.maxInterned)
	}
}

func TestDecodeNesting(t *testing.T) {
	d := newTestDecoder(t)
	// encoding/json allows 10,000 levels including the event object itself.
	for _, depth := range []int{maxNestingDepth - 1, maxNestingDepth} {
		in := `{"key":"a","metric":"m","value":1,"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
		_, r := d.Decode([]byte(in), defTS)
		_, rr := refDecode([]byte(in), 16, defTS)
		if r != rr {
			t.Errorf("depth %d: ours %v, encoding/json %v", depth, r, rr)
		}
	}
}

// TestDecodeAllocs proves the per-event path allocates nothing once the series' strings are interned.
func TestDecodeAllocs(t *testing.T) {
	d := newTestDecoder(t)
	lines := [][]byte{
		[]byte(`{"ts": 1764489600123, "key": "tenant-42", "metric": "latency_ms", "value": 87.5}`),
		[]byte(`{"ts":"2025-11-30T08:00:00.123+01:00","key":"t\u00e9","metric":"latency_ms","value":0.001,"count":3,"x":[{}]}`),
		[]byte(`{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`),
		[]byte(`{"span_id":"00F067AA0BA902B7","trace_id":"\u0034bf92f3577b34da6","key":"tenant-42","metric":"latency_ms","value":87.5}`),
	}
	ndjson := bytes.Join(lines, []byte("\n"))
	for _, l := range lines {
		d.Decode(l, defTS) // intern
	}
	var sink float64
	allocs := testing.AllocsPerRun(1000, func() {
		for _, l := range lines {
			ev, _ := d.Decode(l, defTS)
			sink += ev.Value
		}
		d.DecodeLines(ndjson, defTS, func(_ []byte, ev window.Event, _ Reason) { sink += ev.Value })
	})
	if allocs != 0 {
		t.Fatalf("Decode allocates %v times per run for known series, want 0", allocs)
	}
}

func TestDecodeInternBounded(t *testing.T) {
	d, err := NewDecoder(Config{MaxInterned: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		ev, r := d.Decode(fmt.Appendf(nil, `{"key":"k%d","metric":"m","value":1}`, i), defTS)
		if r != ReasonNone || ev.Key != fmt.Sprintf("k%d", i) {
			t.Fatalf("event %d: %+v %v", i, ev, r)
		}
		if d.intern.n > 8 {
			t.Fatalf("intern table grew to %d entries, cap 8", d.intern.n)
		}
	}
}

// strictRFC3339 is the shape rfc3339.Millis accepts; time.Parse also accepts looser
// forms (one-digit hours, comma fractions, offsets of 24 h and more) that the decoder refuses.
var strictRFC3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$`)

// refDecode is the specification written with encoding/json: the same fields, checks and
// order of checks as Decoder, by the obvious (slow) route.
func refDecode(line []byte, maxKey int, defaultTS int64) (window.Event, Reason) {
	none := window.Event{}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil || m == nil {
		return none, ReasonInvalidJSON
	}
	if refRepeats(line) {
		return none, ReasonBadField
	}
	present := func(f string) (json.RawMessage, bool) {
		raw, ok := m[f]
		return raw, ok && string(raw) != "null"
	}
	name := func(f string, metric bool) (string, Reason) {
		raw, ok := present(f)
		if !ok {
			return "", ReasonMissingField
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || lossyJSONString(raw) {
			return "", ReasonBadField
		}
		switch {
		case s == "":
			return "", ReasonMissingField
		case len(s) > maxKey:
			return "", ReasonKeyTooLong
		case refRefusedChars(s):
			return "", ReasonBadField
		}
		return s, ReasonNone
	}
	ev := window.Event{TS: defaultTS, Count: 1}
	var r Reason
	if ev.Key, r = name("key", false); r != ReasonNone {
		return none, r
	}
	if ev.Metric, r = name("metric", true); r != ReasonNone {
		return none, r
	}
	raw, ok := present("value")
	if !ok {
		return none, ReasonMissingField
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return none, ReasonBadField
	}
	if err := json.Unmarshal(raw, &ev.Value); err != nil {
		return none, ReasonInvalidValue
	}
	if raw, ok := present("ts"); ok {
		if raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || !strictRFC3339.MatchString(s) {
				return none, ReasonBadField
			}
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return none, ReasonBadField
			}
			ev.TS = t.UnixMilli()
		} else if err := json.Unmarshal(raw, &ev.TS); err != nil {
			return none, ReasonBadField
		}
	}
	if raw, ok := present("count"); ok {
		if err := json.Unmarshal(raw, &ev.Count); err != nil || ev.Count == 0 {
			return none, ReasonBadField
		}
	}
	if raw, ok := present("labels"); ok {
		if ev.Key, r = refLabels(raw, ev.Key); r != ReasonNone {
			return none, r
		}
	}
	ev.TraceID, ev.SpanID = refIDs(m)
	return ev, ReasonNone
}

// refRepeats reports an object (valid JSON) that gives one of the event's members twice, its
// names unescaped as encoding/json unescapes them.
func refRepeats(line []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil {
		panic(err) // json.Unmarshal took the line
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err)
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			panic(err)
		}
		switch name {
		case "key", "metric", "value", "ts", "count", "labels", "trace_id", "span_id":
			if seen[name] {
				return true
			}
			seen[name] = true
		}
	}
	return false
}

// refRefusedChars reports a key, metric or label value holding a C0 or C1 control, DEL, or a
// bidi override or isolate.
func refRefusedChars(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.Is(unicode.Cc, r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
	})
}

// promLabelName is Prometheus' rule for a label name.
var promLabelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// refLabels is the labels rule by encoding/json's tokens (which keep a repeated name, as a
// map would not) and window.AppendSeries: the series string of key and raw, a JSON value
// that is not null, or the first member's refusal.
func refLabels(raw json.RawMessage, key string) (string, Reason) {
	if raw[0] != '{' {
		return "", ReasonBadField
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		panic(err) // json.Unmarshal took the line
	}
	var ls []window.Label
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err)
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			panic(err)
		}
		if !promLabelName.MatchString(name) || name == "key" || strings.HasPrefix(name, "__") ||
			seen[name] || len(ls) == window.MaxLabels {
			return "", ReasonBadField
		}
		seen[name] = true
		var s string
		if v[0] != '"' || json.Unmarshal(v, &s) != nil || lossyJSONString(v) {
			return "", ReasonBadField
		}
		if len(s) > window.MaxLabelValueLen {
			return "", ReasonKeyTooLong
		}
		if refRefusedChars(s) {
			return "", ReasonBadField
		}
		ls = append(ls, window.Label{Name: name, Value: s})
	}
	window.SortLabels(ls)
	series, err := window.AppendSeries(nil, key, ls)
	if err != nil {
		panic(err) // the rules above are AppendSeries' and more
	}
	return string(series), ReasonNone
}

var nanToken = regexp.MustCompile(`NaN|Infinity`)

// checkAgainstRef fails t when Decode and refDecode disagree on line. The one allowed
// difference: bare NaN/Infinity tokens are not JSON, so encoding/json says invalid_json
// where the decoder names the problem (invalid_value, or an earlier field's reason).
// lossyJSONString reports whether encoding/json would rewrite part of the JSON string raw
// to U+FFFD: invalid UTF-8, or an escaped surrogate that is not half of a pair.
func lossyJSONString(raw []byte) bool {
	if !utf8.Valid(raw) {
		return true
	}
	high := false // the previous escape was a high surrogate
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			if high {
				return true
			}
			continue
		}
		i++
		if raw[i] != 'u' {
			if high {
				return true
			}
			continue
		}
		v, _ := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
		i += 4
		switch {
		case v >= 0xD800 && v < 0xDC00:
			if high {
				return true
			}
			high = true
		case v >= 0xDC00 && v < 0xE000:
			if !high {
				return true
			}
			high = false
		default:
			if high {
				return true
			}
		}
	}
	return high
}

func checkAgainstRef(t *testing.T, d *Decoder, line []byte) {
	t.Helper()
	ev, r := d.Decode(line, defTS)
	rev, rr := refDecode(line, d.maxKey, defTS)
	if rr == ReasonInvalidJSON && r != ReasonInvalidJSON && r != ReasonNone && nanToken.Match(line) {
		return
	}
	if r != rr || ev.Key != rev.Key || ev.Metric != rev.Metric || ev.TS != rev.TS || ev.Count != rev.Count ||
		math.Float64bits(ev.Value) != math.Float64bits(rev.Value) || ev.Feed != rev.Feed || ev.TraceID != rev.TraceID || ev.SpanID != rev.SpanID {
		t.Fatalf("input %q:\n ours           %+v %v\n encoding/json  %+v %v", line, ev, r, rev, rr)
	}
}

// genLine builds a random, mostly plausible event line: fields in any order, odd
// whitespace, escapes, wrong types, extra and duplicate fields, odd numbers and times.
func genLine(rng *rand.Rand) []byte {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	ws := func() string { return pick("", "", " ", "\t", "\n ", "\r\n") }
	str := func() string {
		return pick(`"tenant-1"`, `"t\u00e9"`, `"a\"b"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"é"`,
			"\"\xff\xfe\"", `""`, `"x\u0000y"`, `"`+strings.Repeat("k", 16)+`"`, `"`+strings.Repeat("k", 17)+`"`, `"\/\b\f\n\r\t"`)
	}
	num := func() string {
		return pick("0", "-0", "1", "87.5", "-2.5e3", "1E+2", "1e-7", "0.1", "123456789012345678901234567890",
			"1e400", "-1e400", "4.9e-324", "1e-400", "9007199254740993", "0.30000000000000004",
			strconv.FormatFloat(rng.NormFloat64()*1000, 'g', -1, 64),
			strconv.FormatFloat(rng.ExpFloat64(), 'e', rng.IntN(20), 64),
			strconv.FormatInt(rng.Int64N(1<<62)-1<<61, 10), "9223372036854775807", "-9223372036854775808",
			"9223372036854775808", "18446744073709551615", "18446744073709551616", "1.0", "1e3")
	}
	ts := func() string {
		return pick(num(), `"2025-11-30T08:00:00Z"`, `"2025-11-30T08:00:00.123456789012+05:30"`, `"2024-02-29T23:59:59.9-23:59"`,
			`"2025-02-29T00:00:00Z"`, `"2025-11-30T24:00:00Z"`, `"2025-11-30t08:00:00Z"`, `"2025-11-30T08:00:00"`,
			`"2025-11-30T8:00:00Z"`, `"2025-11-30T08:00:00,5Z"`, `"2025-11-30T08:00:00+24:00"`, `"0000-01-01T00:00:00Z"`,
			`"9999-12-31T23:59:59.999Z"`, `"2025-11-30T08:00:00.Z"`, `"2025-11-30T08:00:00\u005a"`, "null", "true")
	}
	any := func() string {
		return pick(str(), num(), "true", "false", "null", "[]", "{}", `[1,"a",{"b":[null]}]`, `{"key":"nested"}`, "NaN", "Infinity", "-Infinity")
	}
	type field struct{ name, val string }
	var fs []field
	if rng.IntN(10) > 0 {
		fs = append(fs, field{`"key"`, pick(str(), str(), any())})
	}
	if rng.IntN(10) > 0 {
		fs = append(fs, field{`"metric"`, pick(`"latency_ms"`, `"cost"`, str(), any())})
	}
	if rng.IntN(10) > 0 {
		fs = append(fs, field{`"value"`, pick(num(), num(), any())})
	}
	if rng.IntN(2) == 0 {
		fs = append(fs, field{`"ts"`, ts()})
	}
	if rng.IntN(3) == 0 {
		fs = append(fs, field{`"count"`, pick(num(), "3", "1", any())})
	}
	if rng.IntN(3) == 0 {
		fs = append(fs, field{pick(`"labels"`, `"labels"`, `"l\u0061bels"`), pick(labelsValue(rng), labelsValue(rng), any())})
	}
	if rng.IntN(2) == 0 {
		fs = append(fs, field{pick(`"trace_id"`, `"trace_id"`, `"tr\u0061ce_id"`, `"Trace_id"`), pick(idValue(rng, 32), idValue(rng, 32), idValue(rng, 16), any())})
	}
	if rng.IntN(3) == 0 {
		fs = append(fs, field{pick(`"span_id"`, `"span_id"`, `"sp\u0061n_id"`), pick(idValue(rng, 16), idValue(rng, 16), any())})
	}
	for range rng.IntN(3) {
		fs = append(fs, field{pick(`"extra"`, `"Key"`, `"k\u0065y"`, `"value"`, `"ts"`, `"\u00e9"`, `"labels"`, `"trace_id"`, `"span_id"`), any()})
	}
	rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	var b strings.Builder
	b.WriteString(ws() + "{")
	for i, f := range fs {
		if i > 0 {
			b.WriteString(ws() + ",")
		}
		b.WriteString(ws() + f.name + ws() + ":" + ws() + f.val + ws())
	}
	b.WriteString("}" + ws())
	out := []byte(b.String())
	// Sometimes damage the line.
	switch rng.IntN(12) {
	case 0:
		out = out[:rng.IntN(len(out)+1)]
	case 1:
		out[rng.IntN(len(out))] = byte(rng.IntN(256))
	case 2:
		out = append(out, pick("x", "{}", ",", " ")...)
	}
	return out
}

// TestDecodeDifferential runs the decoder and the encoding/json specification over the same
// generated inputs and requires identical events and reasons.
func TestDecodeDifferential(t *testing.T) {
	d := newTestDecoder(t)
	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[Reason]int{}
	withIDs := 0
	for range 30000 {
		line := genLine(rng)
		checkAgainstRef(t, d, line)
		ev, r := d.Decode(line, defTS)
		counts[r]++
		if ev.TraceID != [16]byte{} {
			withIDs++
		}
	}
	if withIDs < 30 {
		t.Errorf("only %d of 30000 events had trace ids (%v)", withIDs, counts)
	}
	// The generator must exercise every decoder reason, or the comparison proves little.
	for _, r := range []Reason{ReasonNone, ReasonInvalidJSON, ReasonMissingField, ReasonBadField, ReasonInvalidValue, ReasonKeyTooLong} {
		if counts[r] < 100 {
			t.Errorf("reason %v produced only %d times in 30000 inputs", r, counts[r])
		}
	}
}

var fuzzSeeds = []string{
	`{"ts": 1764489600123, "key": "tenant-42", "metric": "latency_ms", "value": 87.5}`,
	`{"key":"a","metric":"m","value":1,"ts":"2025-11-30T10:00:00.1239+02:00","count":3}`,
	`{"key":"t\u00e9\"x","metric":"m","value":-2.5e3,"extra":[1,{"x":null}]}`,
	`{"key":"a","metric":"m","value":NaN}`,
	`{"key":"a","metric":"m","value":1e400}`,
	`{"key":"a","metric":"m\u0000","value":1}`,
	`{"key":"\ud800\u0041","metric":"m","value":1}`,
	`not json`,
	`{"key":"a","metric":"m","value":1`,
	`{"key":"a","metric":"m","value":1,"labels":{"route":"/pay","code":"200"}}`,
	`{"labels":{"r\u006fute":"\/p\u0061y","code":""},"key":"a","metric":"m","value":1}`,
	`{"key":"a","metric":"m","value":1,"labels":{"key":"x"}}`,
	`{"key":"a","metric":"m","value":1,"labels":{"a":"1","a":"2"}}`,
	`{"key":"a","metric":"m","value":1,"labels":{"a":1}}`,
	`{"key":"a","metric":"m","value":1,"labels":{"a":"\ud800"}}`,
	`{"key":"a","metric":"m","value":1,"labels":"route"}`,
	`{"key":"a","metric":"m","value":1,"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736","span_id":"00f067aa0ba902b7"}`,
	`{"span_id":"00f067aa0ba902b7","trace_id":"\u0034bf92f3577b34da6","key":"a","metric":"m","value":1}`,
	`{"key":"a","metric":"m","value":1,"trace_id":"00000000000000000000000000000000","span_id":null}`,
	`{"key":"a","metric":"m","value":1,"trace_id":"4bf92f3577b34da6a3ce929d0e0e473","span_id":7}`,
	`{"key":"a","metric":"m","value":1,"trace_id":"4bf92f3577b34da6","trace_id":"4bf92f3577b34da6"}`,
}

// FuzzDecode checks that no input panics, that the decoder agrees with encoding/json, and
// that an accepted event survives a round trip through encoding/json and through Append.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		f.Add(genLine(rng))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d, err := NewDecoder(Config{MaxKeyLen: 16})
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstRef(t, d, line)
		ev, r := d.Decode(line, defTS)
		if r != ReasonNone {
			checkExplain(t, d, line, r)
			return
		}
		labels := map[string]string{}
		window.EachLabel(ev.Key, func(n, v string) bool { labels[n] = v; return true })
		var traceID, spanID string // none, or both (an event has no span id without a trace id)
		if ev.TraceID != [16]byte{} {
			traceID = strings.ToUpper(hex.EncodeToString(ev.TraceID[:]))
			if ev.SpanID != [8]byte{} {
				spanID = hex.EncodeToString(ev.SpanID[:])
			}
		}
		out, err := json.Marshal(struct {
			TS      int64             `json:"ts"`
			Key     string            `json:"key"`
			Metric  string            `json:"metric"`
			Value   float64           `json:"value"`
			Count   uint64            `json:"count"`
			Labels  map[string]string `json:"labels,omitempty"`
			TraceID string            `json:"trace_id,omitempty"`
			SpanID  string            `json:"span_id,omitempty"`
		}{ev.TS, window.SeriesKeyOf(ev.Key), ev.Metric, ev.Value, ev.Count, labels, traceID, spanID})
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", ev, err)
		}
		again, r2 := d.Decode(out, 0)
		if r2 != ReasonNone || again != ev {
			t.Fatalf("round trip of %q through %s: %+v %v, want %+v", line, out, again, r2, ev)
		}
		ours := Append(nil, ev)
		again, r2 = d.Decode(ours, 0)
		if r2 != ReasonNone || again != ev {
			t.Fatalf("round trip of %q through Append %s: %+v %v, want %+v", line, ours, again, r2, ev)
		}
	})
}

// TestDecodeRefusesInvalidUTF8Names is the eighth probe: keys are bytes, so "t\xff"
// and "t\xfe" were both rewritten to "t\uFFFD" and shared one series. A key or metric that
// is not valid UTF-8, raw or through an escaped lone surrogate, is refused as bad_field.
func TestDecodeRefusesInvalidUTF8Names(t *testing.T) {
	d := newTestDecoder(t)
	for _, tc := range []struct {
		line string
		want Reason
	}{
		{"{\"key\":\"t\xff\",\"metric\":\"m\",\"value\":1}", ReasonBadField},
		{"{\"key\":\"t\xfe\",\"metric\":\"m\",\"value\":1}", ReasonBadField},
		{"{\"key\":\"t\xff\\n\",\"metric\":\"m\",\"value\":1}", ReasonBadField}, // escaped and invalid
		{"{\"key\":\"k\",\"metric\":\"m\xc3\",\"value\":1}", ReasonBadField},
		{`{"key":"t\ud800","metric":"m","value":1}`, ReasonBadField},
		{`{"key":"t\udc00\ud800","metric":"m","value":1}`, ReasonBadField},
		{`{"key":"t\u00e9\ud83d\ude00","metric":"m","value":1}`, ReasonNone},
		{"{\"key\":\"t\u00e9\",\"metric\":\"m\",\"value\":1}", ReasonNone},
		{"{\"key\":\"t\uFFFD\",\"metric\":\"m\",\"value\":1}", ReasonNone}, // a real U+FFFD is a key like any other
	} {
		if _, r := d.Decode([]byte(tc.line), defTS); r != tc.want {
			t.Errorf("%q: %v, want %v", tc.line, r, tc.want)
		}
	}
}
