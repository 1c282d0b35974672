package event

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// FuzzEventMap holds a MapDecoder to its rules on any input, through the presets and a map of
// nested fields: it never panics; a line is refused as invalid_json exactly when
// encoding/json finds it is not one JSON object, and then once, else it gives one event per
// metric; every refusal says why in one printable line; an accepted event's series string
// holds to window's rules, and its value is encoding/json's number at the value's field
// (the last of repeated members, as there), times the scale.
func FuzzEventMap(f *testing.F) {
	f.Add([]byte(envoyLine("2026-12-02T09:05:00.123Z", "GET", "/pay?id=7", "200", "-", 466, 3, "httproute/default/pay/rule/0")))
	f.Add([]byte(envoyLine("2026-12-02T09:05:01.5+01:00", "POST", "/missing", "404", "NR", 0, 0, "")))
	f.Add([]byte(nginxLine("1764666300.123", "shop.example.com", "GET", "/cart", 200, "0.005", 612)))
	f.Add([]byte(nginxLine("1764666301", "api.example.com", "POST", "/a\\\"b", 502, "12.5", 0) + "\n" + nginxLine("-1.5", "h", "GET", "/", 200, "1e3", 1)))
	f.Add([]byte(`{"svc":"pay","req":{"at":1764666300123456,"timing":{"total":"2500"}},"res":{"code":200},"ok":true}`))
	f.Add([]byte(`{"svc":null,"req":{"timing":{"total":1e999}},"res":[1],"ok":{"a":1}}` + "\n" + `{"svc":"\ud800"}`))
	f.Add([]byte(envoyLine("2026-12-02T09:05:00.123Z", "GET", "/", "200", "-", 1, 2, "c") + "\n" +
		strings.Replace(envoyLine("2026-12-02T09:06:00Z", "GET", "/", "200", "-", 1, 2, "d"), `"duration":2,`, ``, 1)))
	f.Add([]byte("{\"duration\":1,\n\"upstream_cluster\":\"c\"}\r\n  \n {\"duration\": 2, \"upstream_cluster\": \"c\", \"x\": {\"y\":\n[1]}}\n{}{}"))
	f.Add([]byte(`{"svc":"a","req":{"timing":{"total":1},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"span":"B7AD6B7169203331"}` + "\n" +
		`{"svc":"a","req":{"timing":{"total":1},"traceparent":"a3ce929d0e0e4736"}}` + "\n" + `{"svc":"a","req":{"timing":{"total":1},"traceparent":"\u0034bf92f3577b34da6a3ce929d0e0e4736"}}`))
	f.Add([]byte(`{"duration":NaN,"upstream_cluster":"c","start_time":"2026-13-01T00:00:00Z"}`))
	nested := Map{Metrics: []MapMetric{{
		Metric: "latency_ms",
		TS:     MapTS{Field: "req.at", Unit: "us"},
		Value:  MapValue{Field: "req.timing.total", Scale: 0.001},
		Key:    MapKey{Field: "svc", Default: "unknown"},
		Labels: []MapLabel{{Name: "ok", Field: "ok"}, {Name: "code", Field: "res.code"}},
		Trace:  MapTrace{Field: "req.traceparent", Span: "span"},
	}}}
	maps := []Map{presets["envoy"], presets["nginx"], nested}
	var decs []*MapDecoder
	for _, m := range maps {
		md, err := NewMapDecoder(m, Config{})
		if err != nil {
			f.Fatal(err)
		}
		decs = append(decs, md)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for k, md := range decs {
			m := maps[k]
			var lines [][]byte
			for _, l := range bytes.Split(data, []byte{'\n'}) {
				if textparse.SkipSpace(l, 0) != len(l) {
					lines = append(lines, l)
				}
			}
			type got struct {
				line []byte
				ev   window.Event
				r    Reason
			}
			var evs []got
			n := md.DecodeLines(data, 42, func(line []byte, ev window.Event, r Reason) {
				evs = append(evs, got{line, ev, r})
			})
			if n != len(evs) {
				t.Fatalf("DecodeLines says %d events, gave %d", n, len(evs))
			}
			// Each line decodes as it would alone, by a fresh decoder: nothing of a line before
			// (a refused metric's included) leaks into the next.
			var alone []got
			for _, line := range lines {
				fresh, err := NewMapDecoder(m, Config{})
				if err != nil {
					t.Fatal(err)
				}
				fresh.DecodeLines(line, 42, func(line []byte, ev window.Event, r Reason) {
					alone = append(alone, got{line, ev, r})
				})
			}
			if len(alone) != len(evs) {
				t.Fatalf("%d events line by line, %d in one body", len(alone), len(evs))
			}
			for j := range alone {
				if alone[j].ev != evs[j].ev || alone[j].r != evs[j].r {
					t.Fatalf("event %d: %+v %s alone, %+v %s after the lines before", j, alone[j].ev, alone[j].r, evs[j].ev, evs[j].r)
				}
			}
			i := 0
			for _, line := range lines {
				if i >= len(evs) || !bytes.Equal(evs[i].line, line) {
					t.Fatalf("line %q: no event for it", line)
				}
				isObject := json.Valid(line) && line[textparse.SkipSpace(line, 0)] == '{'
				if evs[i].r == ReasonInvalidJSON {
					if isObject {
						t.Fatalf("%q: refused as invalid_json, but encoding/json reads an object", line)
					}
					checkDetail(t, md, line)
					i++
					continue
				}
				if !isObject {
					t.Fatalf("%q: read, but encoding/json says it is not an object", line)
				}
				var doc map[string]any
				dec := json.NewDecoder(bytes.NewReader(line))
				dec.UseNumber()
				if err := dec.Decode(&doc); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				for j := range m.Metrics {
					if i >= len(evs) || !bytes.Equal(evs[i].line, line) {
						t.Fatalf("line %q: %d events, want %d", line, j, len(m.Metrics))
					}
					e := evs[i]
					i++
					if e.r != ReasonNone {
						checkDetail(t, md, line)
						continue
					}
					mm := m.Metrics[j]
					if e.ev.Metric != mm.Metric || e.ev.Count != 1 {
						t.Fatalf("%q: event %+v", line, e.ev)
					}
					if err := window.CheckSeries(e.ev.Key, DefaultMaxKeyLen); err != nil {
						t.Fatalf("%q: series %q: %v", line, e.ev.Key, err)
					}
					if got, want := window.SeriesKeyOf(e.ev.Key), jsonText(doc, mm.Key.Field); got != want && !(want == "" && got == mm.Key.Default) {
						t.Fatalf("%q: key %q, encoding/json's %q (default %q)", line, got, want, mm.Key.Default)
					}
					for _, l := range mm.Labels {
						if got, want := window.LabelValue(e.ev.Key, l.Name), jsonText(doc, l.Field); got != want {
							t.Fatalf("%q: label %s %q, encoding/json's %q", line, l.Name, got, want)
						}
					}
					want, ok := jsonNumber(doc, mm.Value.Field)
					if !ok {
						t.Fatalf("%q: accepted, but encoding/json finds no number at %s", line, mm.Value.Field)
					}
					if scale := mm.Value.Scale; scale != 0 {
						want *= scale
					}
					if e.ev.Value != want {
						t.Fatalf("%q: value %v, encoding/json's %v", line, e.ev.Value, want)
					}
					if tr, sp := refTraceIDs(doc, mm.Trace); e.ev.TraceID != tr || e.ev.SpanID != sp {
						t.Fatalf("%q: ids %x %x, want %x %x", line, e.ev.TraceID, e.ev.SpanID, tr, sp)
					}
				}
			}
			if i != len(evs) {
				t.Fatalf("%d events, %d accounted for", len(evs), i)
			}
		}
	})
}

// checkDetail: a refused line's detail is one short printable line.
func checkDetail(t *testing.T, md *MapDecoder, line []byte) {
	t.Helper()
	s := md.Explain(line)
	if s == "" || !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r") || len(s) > 400 {
		t.Fatalf("%q: detail %q", line, s)
	}
}

// refTraceIDs is MapTrace's rule over encoding/json's strings at its fields in doc, written
// apart from the decoder's (by split and encoding/hex).
func refTraceIDs(doc map[string]any, mt MapTrace) (trace [16]byte, span [8]byte) {
	if mt.Field == "" {
		return
	}
	str, ok := jsonAt(doc, mt.Field).(string)
	if !ok {
		return
	}
	decode := func(dst []byte, s string) bool {
		b, err := hex.DecodeString(s)
		return err == nil && len(b) == len(dst) && copy(dst, b) > 0
	}
	switch len(str) {
	case 32:
		ok = decode(trace[:], str)
	case 16:
		ok = decode(trace[8:], str)
	default:
		p := strings.Split(str, "-")
		var v, fl [1]byte
		ok = len(p) >= 4 && decode(v[:], p[0]) && v[0] != 0xff && (len(p) == 4 || v[0] != 0) &&
			decode(trace[:], p[1]) && decode(span[:], p[2]) && span != [8]byte{} && decode(fl[:], p[3])
	}
	if !ok || trace == [16]byte{} {
		return [16]byte{}, [8]byte{}
	}
	if s, isStr := jsonAt(doc, mt.Span).(string); mt.Span != "" && isStr {
		var id [8]byte
		if decode(id[:], s) && id != [8]byte{} {
			span = id
		}
	}
	return trace, span
}

// jsonAt is encoding/json's value at the dotted path of doc, nil when there is none.
func jsonAt(doc map[string]any, path string) any {
	var v any = doc
	for _, name := range strings.Split(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[name]
	}
	return v
}

// jsonNumber is encoding/json's number at the dotted path of doc: a JSON number, or a string
// holding one.
func jsonNumber(doc map[string]any, path string) (float64, bool) {
	var v any = doc
	for _, name := range strings.Split(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		v = o[name]
	}
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil && json.Valid([]byte(n))
	}
	return 0, false
}

// jsonText is encoding/json's text at the dotted path of doc as a key or a label reads it: a
// string, a number's literal, true or false; "" for anything else.
func jsonText(doc map[string]any, path string) string {
	var v any = doc
	for _, name := range strings.Split(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = o[name]
	}
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return string(t)
	case bool:
		return strconv.FormatBool(t)
	}
	return ""
}
