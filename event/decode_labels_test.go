package event

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// series is the series string of key and labels given as name, value pairs, by window's writer.
func series(t testing.TB, key string, nv ...string) string {
	t.Helper()
	var ls []window.Label
	for i := 0; i < len(nv); i += 2 {
		ls = append(ls, window.Label{Name: nv[i], Value: nv[i+1]})
	}
	window.SortLabels(ls)
	b, err := window.AppendSeries(nil, key, ls)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// manyLabels is a labels object of n members, l0 … l(n−1) written in reverse order.
func manyLabels(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, `"l%d":"v%d"`, i, i)
		if i > 0 {
			b.WriteString(",")
		}
	}
	b.WriteString("}")
	return b.String()
}

// labelsValue is the value of a labels member: objects taken, and each way of breaking the
// labels rule (names, repeats, counts, types, lengths, characters), valid JSON or not.
func labelsValue(rng *rand.Rand) string {
	vals := []string{
		`{"route":"/pay","code":"200"}`, `{"code":"200","route":"/pay","method":"POST"}`, `{}`, `{ }`, `null`,
		` { "route" : "/pay" ,` + "\t" + `"code" : "200" } `, `{"route":"/pay","code":""}`, `{"a":""}`,
		`{"r\u006fute":"\/p\u0061y"}`, `{"route":"t\u00e9\"x"}`, "{\"route\":\"t\u00e9\"}", `{"b":"1","a":"2","B":"3","_":"4","a1":"5"}`,
		`{"key":"x"}`, `{"__name__":"x"}`, `{"_x":"1"}`, `{"1a":"1"}`, `{"a-b":"1"}`, `{"":"1"}`, `{"\u00e9":"1"}`, `{"k\u0065y":"1"}`,
		`{"a":1}`, `{"a":null}`, `{"a":["x"]}`, `{"a":{"b":"c"}}`, `{"a":true}`, `{"a":NaN}`,
		`{"a":"1","a":"2"}`, `{"a":"","a":"2"}`, `{"a":"1","b":"2","\u0061":"3"}`,
		`{"a":"` + strings.Repeat("v", 256) + `"}`, `{"a":"` + strings.Repeat("v", 257) + `"}`,
		`{"a":"` + strings.Repeat("é", 128) + `"}`, `{"a":"` + strings.Repeat(`\u00e9`, 129) + `"}`,
		`{"a":"` + strings.Repeat("v", 257) + `","b":1}`, `{"b":1,"a":"` + strings.Repeat("v", 257) + `"}`,
		`{"a":"\u0000"}`, `{"a":"x\ty"}`, `{"a":"\u202e"}`, `{"a":"\ud800"}`, "{\"a\":\"x\xff\"}", `{"a":"\u007f"}`, `{"a":"\u0085"}`,
		manyLabels(3), manyLabels(16), manyLabels(17), `{"z":"",` + manyLabels(16)[1:],
		`"route"`, `[]`, `[{"a":"1"}]`, `1`, `true`, `{"a":"1",}`, `{"a":"1"`, `{"a"}`,
	}
	return vals[rng.IntN(len(vals))]
}

// TestDecodeLabels: the labels member makes the event's key its series string (window's
// encoding, the labels sorted by name, an empty value left out) in any position and on
// every path, and each way of breaking the rule is refused with the package doc's reason.
func TestDecodeLabels(t *testing.T) {
	long := strings.Repeat("v", window.MaxLabelValueLen)
	for _, c := range []struct {
		line string
		key  string // the series string wanted, for ReasonNone
		r    Reason
		path string // the fast path that takes it, when one should
	}{
		{`{"ts":1,"key":"k","metric":"m","value":1,"labels":{"route":"/pay","code":"200"}}`, series(t, "k", "route", "/pay", "code", "200"), ReasonNone, "exact"},
		{`{"ts":1,"key":"k","metric":"m","value":1,"count":2,"labels":{"route":"/pay","code":"200"}}`, series(t, "k", "route", "/pay", "code", "200"), ReasonNone, "exact"},
		{`{"labels":{"route":"/pay","code":"200"},"ts":1,"key":"k","metric":"m","value":1}`, series(t, "k", "route", "/pay", "code", "200"), ReasonNone, "fast"},
		{`{ "key" : "k", "labels" : { "b" : "2" , "a" : "1" }, "metric":"m", "value":1 }`, series(t, "k", "a", "1", "b", "2"), ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":{"r\u006fute":"\/p\u0061y","c":"t\u00e9\"x"}}`, series(t, "k", "route", "/pay", "c", "té\"x"), ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":{"b":"1","a":"2","B":"3","_":"4"}}`, series(t, "k", "a", "2", "b", "1", "B", "3", "_", "4"), ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":{"route":"/pay","code":""}}`, series(t, "k", "route", "/pay"), ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":""}}`, "k", ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":{}}`, "k", ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":null}`, "k", ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"1"},"labels":{"b":"2"}}`, "", ReasonBadField, ""}, // given twice
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"1"},"labels":null}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":1},"labels":{"b":"2"}}`, "", ReasonBadField, ""}, // the scanner path's
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"` + long + `"}}`, series(t, "k", "a", long), ReasonNone, "fast"},
		{`{"key":"k","metric":"m","value":1,"labels":` + manyLabels(16) + `}`, "", ReasonNone, "fast"},
		// Refusals.
		{`{"key":"k","metric":"m","value":1,"labels":"route"}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":[]}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":1}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":null}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":{"b":"c"}}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"key":"x"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"__name__":"x"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"1a":"x"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a-b":"x"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"":"x"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"1","a":"2"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"","\u0061":"2"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":` + manyLabels(17) + `}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"` + long + `v"}}`, "", ReasonKeyTooLong, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"` + long + `v","b":1}}`, "", ReasonKeyTooLong, ""}, // the first member's reason
		{`{"key":"k","metric":"m","value":1,"labels":{"b":1,"a":"` + long + `v"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"\u0000"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"\u202e"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"\ud800"}}`, "", ReasonBadField, ""},
		{"{\"key\":\"k\",\"metric\":\"m\",\"value\":1,\"labels\":{\"a\":\"x\xff\"}}", "", ReasonBadField, ""},
		{`{"key":"","metric":"m","value":1,"labels":{"key":"x"}}`, "", ReasonMissingField, ""}, // key first
		{`{"key":"k","metric":"m","value":1,"count":0,"labels":{"a":"` + long + `v"}}`, "", ReasonBadField, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":"1",}}`, "", ReasonInvalidJSON, ""},
		{`{"key":"k","metric":"m","value":1,"labels":{"a":NaN}}`, "", ReasonInvalidJSON, ""},
	} {
		if c.key == "" && c.r == ReasonNone {
			c.key = strings.Join([]string{"k", "l0=v0", "l1=v1", "l10=v10", "l11=v11", "l12=v12", "l13=v13", "l14=v14", "l15=v15",
				"l2=v2", "l3=v3", "l4=v4", "l5=v5", "l6=v6", "l7=v7", "l8=v8", "l9=v9"}, "\xff")
		}
		d := newTestDecoder(t)
		ev, r := d.Decode([]byte(c.line), defTS)
		if r != c.r || ev.Key != c.key {
			t.Errorf("%s:\n %q %v\nwant %q %v", c.line, ev.Key, r, c.key, c.r)
		}
		checkAgainstRef(t, d, []byte(c.line))
		if took := checkFastPaths(t, []byte(c.line), d); took != c.path {
			t.Errorf("%s: taken by %q, want %q", c.line, took, c.path)
		}
	}
}

// A key whose raw bytes are those of a series string the decoder interned is refused as any
// key holding 0xFF is: series strings share the table with names, whose entries are trusted.
func TestDecodeLabelsKeyNotASeries(t *testing.T) {
	d := newTestDecoder(t)
	if ev, r := d.Decode([]byte(`{"key":"k","metric":"m","value":1,"labels":{"a":"1"}}`), defTS); r != ReasonNone || ev.Key != "k\xffa=1" {
		t.Fatalf("%q %v", ev.Key, r)
	}
	for _, l := range []string{"{\"key\":\"k\xffa=1\",\"metric\":\"m\",\"value\":1}", "{\"metric\":\"m\",\"value\":1,\"key\":\"k\xffa=1\"}"} {
		if ev, r := d.Decode([]byte(l), defTS); r != ReasonBadField {
			t.Errorf("%q: %q %v, want bad_field", l, ev.Key, r)
		}
	}
}

// TestDecodeLabelsAllocs proves that an event with labels allocates nothing once its series
// string is interned, on each path: Append's layout (exact's hand-off to the member loop),
// the labels first and spaced (the member loop), escaped names and values, and the scanner
// path (a line that opens with a space).
func TestDecodeLabelsAllocs(t *testing.T) {
	d := newTestDecoder(t)
	lines := [][]byte{
		Append(nil, window.Event{TS: defTS, Key: series(t, "tenant-42", "route", "/pay", "code", "200", "method", "POST"), Metric: "latency_ms", Value: 87.5, Count: 1}),
		[]byte(`{"labels": {"route": "/pay", "code": "200", "method": "POST"}, "ts": 1764489600123, "key": "tenant-42", "metric": "latency_ms", "value": 87.5}`),
		[]byte(`{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5,"labels":{"r\u006fute":"\/p\u0061y","code":"200","method":"P\u00d6ST"}}`),
		[]byte(` {"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5,"labels":{"route":"/pay","code":"200","method":"POST"}}`),
	}
	for _, l := range lines {
		if ev, r := d.Decode(l, defTS); r != ReasonNone || !window.HasLabels(ev.Key) { // interns
			t.Fatalf("%s: %q %v", l, ev.Key, r)
		}
	}
	var sink int
	allocs := testing.AllocsPerRun(1000, func() {
		for _, l := range lines {
			ev, _ := d.Decode(l, defTS)
			sink += len(ev.Key)
		}
	})
	if allocs != 0 {
		t.Fatalf("Decode of %d events with 3 labels allocates %v times per run, want 0", len(lines), allocs)
	}
}

// TestIntakeRecordLabels: a Kafka record whose events carry labels lands as their series,
// which a selector on the labels reads back, and Append writes what the record held.
func TestIntakeRecordLabels(t *testing.T) {
	in, st := newTestIntake(t)
	d := in.NewDecoder()
	now := defTS
	value := []byte(`{"key":"t1","metric":"latency_ms","value":10,"labels":{"route":"/pay","code":"200"}}
{"key":"t1","metric":"latency_ms","value":30,"labels":{"code":"500","route":"/pay"}}
{"key":"t1","metric":"latency_ms","value":50,"labels":{"route":"/cart","code":"200"}}
{"key":"t1","metric":"latency_ms","value":70}`)
	refused := func(line []byte, r Reason) { t.Errorf("%s refused: %v", line, r) }
	if acc, n := in.TakeRecord(d, value, now, Record{TS: now, Feed: window.FeedOf(1)}, refused); acc != 4 || n != 4 {
		t.Fatalf("TakeRecord = %d accepted of %d", acc, n)
	}
	if agg, err := st.ReadAt(now, "latency_ms", "t1\xffcode=500\xffroute=/pay", time.Minute, nil); err != nil || agg.Count != 1 || agg.Sum != 30 {
		t.Fatalf("series code=500 route=/pay: %+v, %v", agg, err)
	}
	sel, err := window.CompileSelector("t1", []window.Matcher{{Name: "route", Op: window.MatchEqual, Value: "/pay"}})
	if err != nil {
		t.Fatal(err)
	}
	if agg, err := st.ReadSelected(now, "latency_ms", sel, time.Minute, nil, nil); err != nil || agg.Count != 2 || agg.Sum != 40 {
		t.Fatalf("route=/pay: %+v, %v", agg, err)
	}
	if got := st.Keys("latency_ms", ""); len(got) != 4 {
		t.Fatalf("series %q, want 4", got)
	}
	want := `{"ts":1,"key":"t1","metric":"latency_ms","value":10,"count":2,"labels":{"code":"200","route":"/pay"}}`
	if got := Append(nil, window.Event{TS: 1, Key: "t1\xffcode=200\xffroute=/pay", Metric: "latency_ms", Value: 10, Count: 2}); string(got) != want {
		t.Fatalf("Append = %s, want %s", got, want)
	}
}
