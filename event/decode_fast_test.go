package event

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// checkFastPaths fails t unless every fast path that takes line decodes it as the general
// path does, and Decode answers as the general path for every line (so every refusal and
// its Reason are the general path's). Each path gets a decoder of its own: the intern
// table and the metric cache must not change an answer. shared, when not nil, is a decoder
// that has decoded other lines before: what a line left in it (the fields a fast path
// recorded for the scanner path to go on from) must not change an answer either.
func checkFastPaths(t *testing.T, line []byte, shared *Decoder) (took string) {
	t.Helper()
	decoder := func() *Decoder {
		d, err := NewDecoder(Config{MaxKeyLen: 16})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	gen, gr := decoder().decodeGeneral(line, defTS)
	same := func(ev window.Event) bool {
		return ev.TS == gen.TS && ev.Key == gen.Key && ev.Metric == gen.Metric && ev.Count == gen.Count &&
			math.Float64bits(ev.Value) == math.Float64bits(gen.Value) && ev.Feed == gen.Feed &&
			ev.TraceID == gen.TraceID && ev.SpanID == gen.SpanID
	}
	for _, p := range []struct {
		name string
		fn   func(*Decoder, []byte, int64, *window.Event) bool
	}{{"exact", func(d *Decoder, b []byte, ts int64, ev *window.Event) bool {
		switch d.exact(b, ts, ev) {
		case exactTook:
			return true
		case exactRefused: // exact handed its prefix to members, which gave up: so must fast
			var fev window.Event
			if decoder().fast(b, ts, &fev) {
				t.Fatalf("input %q: exact refused after its prefix, fast took it: %+v", b, fev)
			}
		}
		return false
	}}, {"fast", (*Decoder).fast}} {
		var ev window.Event
		if !p.fn(decoder(), line, defTS, &ev) {
			continue
		}
		if took == "" {
			took = p.name
		}
		if gr != ReasonNone || !same(ev) {
			t.Fatalf("input %q:\n %-7s %+v\n general %+v %v", line, p.name, ev, gen, gr)
		}
	}
	d := decoder()
	for range 2 { // twice: the second time from the intern table and the metric cache
		if ev, r := d.Decode(line, defTS); r != gr || !same(ev) {
			t.Fatalf("input %q:\n Decode  %+v %v\n general %+v %v", line, ev, r, gen, gr)
		}
	}
	if shared != nil {
		if ev, r := shared.Decode(line, defTS); r != gr || !same(ev) {
			t.Fatalf("input %q, on a decoder used before:\n Decode  %+v %v\n general %+v %v", line, ev, r, gen, gr)
		}
	}
	return took
}

// genFastLine builds a line near the fast paths' shapes: Append's layout, its members
// reordered or spaced, and then often damaged in one place, so that every early exit of
// the fast paths is taken against the general path's answer.
func genFastLine(rng *rand.Rand) []byte {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	num := func() string {
		return pick("27.431", "0", "-0", "-0.0", "0.5", "1", "123456.7", "1234567.8", "9007199254740993",
			"1e3", "-2.5E-3", "01", "1.", ".5", "0.30000000000000004", "1e400", "-", "12345678",
			strconv.FormatFloat(40*rng.ExpFloat64(), 'f', rng.IntN(8), 64),
			strconv.FormatFloat(rng.NormFloat64()*1e6, 'g', -1, 64))
	}
	ts := func() string {
		return pick("1764489600123", "0", "-1", "-0", "01", "1.5", "9999999999999999", "99999999999999999",
			"1e3", `"2025-11-30T08:00:00Z"`, "null", strconv.FormatInt(rng.Int64N(1<<62)-1<<61, 10))
	}
	name := func() string {
		return `"` + pick("tenant-42", "t", "latency_ms", "0123456789abcdef", "0123456789abcdefg", "", "a b",
			"t\u00e9", `a\"b`, `a\\b`, "a\x7fb", "a\tb", `\u0041`, "tenant-"+strconv.Itoa(rng.IntN(1000))) + `"`
	}
	type member struct{ name, val string }
	ms := []member{{"ts", ts()}, {"key", name()}, {"metric", name()}, {"value", num()}}
	good := rng.IntN(2) == 0 // half the lines well formed, each field in one of the shapes taken
	if good {
		ms = []member{{"ts", pick(strconv.FormatInt(rng.Int64N(1<<50)-rng.Int64N(1<<20), 10), strconv.FormatInt(rng.Int64N(1<<50), 10),
			`"2025-11-30T08:00:00.123Z"`, `"2024-02-29T23:59:59+05:30"`, "null")},
			{"key", `"tenant-` + strconv.Itoa(rng.IntN(1000)) + `"`}, {"metric", pick(`"latency_ms"`, `"m"`, `"0123456789abcdefg"`)},
			{"value", strconv.FormatFloat(40*rng.ExpFloat64(), pick("f", "g")[0], rng.IntN(8)-1, 64)}}
	}
	if rng.IntN(3) == 0 {
		ms = append(ms, member{"count", pick("3", "1", "0", "-1", "1.0", "18446744073709551615", "null")})
	}
	if rng.IntN(3) == 0 { // labels last, as Append writes them, unless shuffled below
		l := labelsValue(rng)
		if good {
			l = pick(`{"route":"/pay","code":"200"}`, `{"code":"200","route":"/pay","method":"POST"}`, `{}`, "null",
				`{"r\u006fute":"\/p\u0061y"}`, `{"a":""}`, manyLabels(16), `{ "b" : "2" , "a" : "1" }`)
		}
		ms = append(ms, member{"labels", l})
	}
	if rng.IntN(3) == 0 { // the ids last, as Append writes them, unless shuffled below
		t, s := idValue(rng, 32), idValue(rng, 16)
		if good {
			t, s = `"`+randHex(rng, []int{32, 32, 16}[rng.IntN(3)])+`"`, pick(`"`+randHex(rng, 16)+`"`, "null", `""`)
		}
		ms = append(ms, member{"trace_id", t})
		if rng.IntN(4) > 0 {
			ms = append(ms, member{"span_id", s})
		}
	}
	if rng.IntN(4) == 0 {
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	}
	switch rng.IntN(10) {
	case 0:
		if !good {
			ms = ms[:rng.IntN(len(ms))] // a field missing
		}
	case 1: // a field repeated, as it was or with another value (refused)
		m := ms[rng.IntN(len(ms))]
		if rng.IntN(2) == 0 {
			m.val = map[string]string{"ts": ts(), "key": name(), "metric": name(), "value": num(), "count": "2", "labels": labelsValue(rng),
				"trace_id": idValue(rng, 32), "span_id": idValue(rng, 16)}[m.name]
		}
		ms = append(ms, m)
		if rng.IntN(2) == 0 { // then a member that only the scanner path takes, so that it goes on from the fast path's position
			late := []member{{"ts", "1234567890123456789"}, {"count", "12345678901234567"}, {"key", `"\u0000"`}, {"value", "1"}, {"labels", `{"a":1}`},
				{"trace_id", "1"}, {"span_id", "[]"}}
			ms = append(ms, late[rng.IntN(len(late))])
		}
	case 2:
		ms = append(ms, member{pick("extra", "Key", "k\\u0065y"), num()})
	case 3, 4, 5: // other members, which the scanner path validates and ignores
		for range 1 + rng.IntN(3) {
			m := member{extraName(rng), extraValue(rng, num)}
			k := rng.IntN(len(ms) + 1)
			ms = append(ms[:k], append([]member{m}, ms[k:]...)...)
		}
	}
	sp := func() string { return pick("", "", "", " ", "  ", "\t", "\r\n ") }
	spaced := rng.IntN(4) == 0
	var b strings.Builder
	b.WriteString("{")
	for i, m := range ms {
		if i > 0 {
			b.WriteString(",")
		}
		if spaced {
			b.WriteString(sp())
		}
		b.WriteString(`"` + m.name + `"`)
		if spaced && rng.IntN(4) == 0 {
			b.WriteString(sp())
		}
		b.WriteString(":")
		if spaced {
			b.WriteString(sp())
		}
		b.WriteString(m.val)
	}
	b.WriteString("}")
	if rng.IntN(8) == 0 {
		b.WriteString(pick(" ", "\r", "x", "}", ","))
	}
	out := []byte(b.String())
	if good {
		return out
	}
	switch rng.IntN(6) {
	case 0:
		out = out[:rng.IntN(len(out)+1)]
	case 1:
		out[rng.IntN(len(out))] = byte(rng.IntN(256))
	case 2:
		i := rng.IntN(len(out) + 1)
		out = append(out[:i], append([]byte(pick(" ", "0", "\"", ",", "e", ".", "\\")), out[i:]...)...)
	}
	return out
}

// extraName is the name of a member the decoder does not keep, or a name that is one of its
// own written another way (escaped, or with spaces before the colon when the line is spaced):
// the fast path must match each as the scanner path does.
func extraName(rng *rand.Rand) string {
	names := []string{"host", "region", "extra", "Key", "keys", "t", "tss", "valu", "metrics", "count_", "", "label", "labelss", `l\u0061bels`,
		"trace", "trace_idx", "span", "span_i", `tr\u0061ce_id`, `sp\u0061n_id`, "trace_id", "span_id",
		`h\u006fst`, `k\u0065y`, `m\u0065tric`, `\u0074s`, `valu\u0065`, `c\u006funt`, `a\"b`, `\ud800`, "h\u00e9", "t\xffs", "ts", "value", "key"}
	return names[rng.IntN(len(names))]
}

// extraValue is a value of an extra member: strings with escapes, numbers, literals, nested
// objects and arrays (sometimes deep, sometimes past encoding/json's nesting limit), and
// things that are not JSON.
func extraValue(rng *rand.Rand, num func() string) string {
	vals := []string{`"a"`, `"web-17.eu-west-1"`, `"a\"b\\c"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, "\"t\u00e9\"", "\"\xff\"", `""`,
		num(), num(), "true", "false", "null", "[]", "{}", `{"region":"eu","az":[1,2,{"rack":null}]}`, `[1,"a",{"b":[null]}]`,
		`{"key":"nested","value":"x"}`, `{ "a" : [ 1 , 2 ] }`, "NaN", "Infinity", "-Infinity", "nul", "[1,]", `{"a"}`, `"x` + "\t" + `"`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100), strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)}
	if rng.IntN(200) == 0 {
		d := 9998 + rng.IntN(3) // around MaxNesting, the top object counted
		return strings.Repeat("[", d) + strings.Repeat("]", d)
	}
	return vals[rng.IntN(len(vals))]
}

// TestDecodeFastDifferential runs the fast paths and the general path over lines near the
// fast shapes and lines of every shape (genLine), and requires that each fast path take a
// good share of the well-formed ones.
func TestDecodeFastDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	took := map[string]int{}
	shared, err := NewDecoder(Config{MaxKeyLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{} // lines whose event has ids, by the path that took them
	for range 20000 {
		for _, line := range [][]byte{genFastLine(rng), genLine(rng)} {
			p := checkFastPaths(t, line, shared)
			took[p]++
			if ev, _ := shared.Decode(line, defTS); ev.TraceID != [16]byte{} {
				ids[p]++
			}
		}
	}
	for _, l := range benchLines(100) {
		if p := checkFastPaths(t, l, shared); p != "exact" {
			t.Fatalf("%q: taken by %q, want the exact path", l, p)
		}
	}
	for _, c := range decodeShapes { // each benchmark shape on the path it is named after
		want := c.path
		if p := checkFastPaths(t, []byte(c.line), shared); p != want {
			t.Errorf("shape %s %q: taken by %q, want %q", c.name, c.line, p, want)
		}
	}
	for _, p := range []string{"exact", "fast"} {
		if took[p] < 500 {
			t.Errorf("the %s path took %d of 40000 lines", p, took[p])
		}
	}
	for _, p := range []string{"exact", "fast", ""} {
		if ids[p] < 50 {
			t.Errorf("the %q path took %d lines with trace ids", p, ids[p])
		}
	}
	t.Logf("taken: %v, with ids: %v", took, ids)
}

var fastFuzzSeeds = []string{
	`{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431}`,
	`{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,"count":3}`,
	`{"ts": 1700000000123, "key": "tenant-42", "metric": "latency_ms", "value": 27.431}`,
	`{"value":-0,"metric":"m","key":"k","count":1}`,
	`{"ts":1700000000123,"key":"0123456789abcdefg","metric":"latency_ms","value":1e3}`,
	`{"ts":01,"key":"k","metric":"m","value":1}`,
	`{"ts":1,"key":"k","metric":"m","value":0.30000000000000004}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"value":2}`,
	"{\"ts\":1,\"key\":\"a\x7f\",\"metric\":\"m\",\"value\":1}",
	`{"ts":1,"key":"k","metric":"m","value":1}` + "\r",
	`{"ts":1,"key":"k","metric":"m","value":1,"host":"a"}`,
	`{"tags":{"region":"eu","az":[1,2]},"ts":1,"key":"k","metric":"m","value":1}`,
	`{"k\u0065y":"k","metric":"m","value":1,"key":"j"}`,
	"{ \"ts\" :\t\"2025-11-30T08:00:00Z\" ,\r\n\"key\":\"k\", \"metric\":\"m\", \"value\":1, \"count\": null }",
	`{"ts":1,"key":"k","metric":"m","value":1,"x":NaN}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,"labels":{"route":"/pay","code":"200"}}`,
	`{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,"count":3,"labels":{"route":"/pay","code":""}}`,
	`{"labels":{"r\u006fute":"\/p\u0061y","c":"t\u00e9\"x"},"key":"k","metric":"m","value":1}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"labels":{"a":"1"},"labels":null}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"labels":{"a":"1","a":"2"}}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"labels":{"key":"x","__a":"y"}}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"labels":{"a":1}}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"labels":{"a":"` + strings.Repeat("v", 257) + `"}}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"labels":` + manyLabels(17) + `}`,
	"{\"ts\":1,\"key\":\"k\",\"metric\":\"m\",\"value\":1,\"labels\":{\"a\":\"x\xff\"}}",
	`{"ts":1,"key":"k","metric":"m","value":1,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"trace_id":"4bf92f3577b34da6","span_id":null,"x":1}`,
	`{"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736","ts":1,"key":"k","metric":"m","value":1,"trace_id":null}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"trace_id":{"a":1},"span_id":"00f067aa0ba902b7"}`,
	`{"ts":1,"key":"k","metric":"m","value":1,"span_id":"00f067aa0ba902b7"}`,
}

// FuzzDecodeFast holds the fast paths to the general path (and Decode to both) on any
// input; scripts/fuzz-short.sh runs it, as the fast paths read every Kafka record first.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range fastFuzzSeeds {
		f.Add([]byte(s))
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 30 {
		f.Add(genFastLine(rng))
	}
	shared, err := NewDecoder(Config{MaxKeyLen: 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkFastPaths(t, line, shared) })
}

// decodeShapes are BenchmarkDecodeShapes' lines, each with the path that must take it (exact
// for a compact prefix of Append's layout that hands the rest of the line to members).
var decodeShapes = []struct{ name, path, line string }{
	{"exact", "exact", `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431}`},
	{"fast", "fast", `{"value": 27.431, "metric": "latency_ms", "key": "tenant-42", "ts": 1700000000123}`},
	{"general", "exact", `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,"host":"a"}`}, // an extra member last
	{"extra-string", "exact", `{"ts":1700000000123,"host":"web-17.eu-west-1","key":"tenant-42","metric":"latency_ms","value":27.431}`},
	{"extra-number", "exact", `{"ts":1700000000123,"key":"tenant-42","seq":981234567,"metric":"latency_ms","value":27.431}`},
	{"nested", "exact", `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,"tags":{"region":"eu-west-1","az":["a","b"]}}`},
	{"pretty", "fast", `{ "ts" : 1700000000123,` + "\t" + `"key" : "tenant-42",` + "\t" + `"metric" : "latency_ms",` + "\t" + `"value" : 27.431 }`},
	{"rfc3339", "fast", `{"ts":"2026-11-30T08:00:00.123Z","key":"tenant-42","metric":"latency_ms","value":27.431}`},
	{"escaped-key", "fast", `{"ts":1700000000123,"key":"tenant-\u0034\u0032","metric":"latency_ms","value":27.431}`}, // the scanner path's
	{"labels", "exact", `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,"labels":{"route":"/pay","code":"200","method":"POST"}}`},
	{"labels-first", "fast", `{"labels":{"route":"/pay","code":"200","method":"POST"},"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431}`},
	{"trace", "exact", `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`},
}

// BenchmarkDecodeShapes times Decode per shape (decodeShapes: Append's layout on the
// exact path, with extra members or nested values there too by its hand-off, the members
// spaced, reordered or with an RFC 3339 ts on the fast path, an escaped key on the scanner
// path, three labels last as Append writes them or first), so that a change to one path
// shows in its own line.
func BenchmarkDecodeShapes(b *testing.B) {
	for _, c := range decodeShapes {
		b.Run(c.name, func(b *testing.B) {
			benchDecodeLine(b, c.line, ReasonNone)
		})
	}
}

// refusalShapes are BenchmarkDecodeRefusals' lines: refusals come only from the scanner
// path, so each costs the fast paths' attempt before it.
var refusalShapes = []struct {
	name   string
	reason Reason
	line   string
}{
	{"missing-key", ReasonMissingField, `{"ts":1700000000123,"metric":"latency_ms","value":27.431}`},
	{"string-value", ReasonBadField, `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":"27.431"}`},
	{"nan-value", ReasonInvalidValue, `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":NaN}`},
	{"truncated", ReasonInvalidJSON, `{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.4`},
	{"bad-ts", ReasonBadField, `{"ts":"yesterday","key":"tenant-42","metric":"latency_ms","value":27.431}`},
}

// BenchmarkDecodeRefusals times Decode per refused shape (refusalShapes).
func BenchmarkDecodeRefusals(b *testing.B) {
	for _, c := range refusalShapes {
		b.Run(c.name, func(b *testing.B) {
			benchDecodeLine(b, c.line, c.reason)
		})
	}
}

// benchDecodeLine times Decode of line on a fresh decoder, each answer held to want.
func benchDecodeLine(b *testing.B, line string, want Reason) {
	d, err := NewDecoder(Config{})
	if err != nil {
		b.Fatal(err)
	}
	bl := []byte(line)
	b.SetBytes(int64(len(bl)))
	b.ReportAllocs()
	for b.Loop() {
		if _, r := d.Decode(bl, defTS); r != want {
			b.Fatal(r)
		}
	}
}
