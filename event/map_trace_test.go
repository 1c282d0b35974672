package event

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// idsHex is ev's trace and span ids in hex, "" for an id of zeros.
func idsHex(ev window.Event) (trace, span string) {
	if ev.TraceID != [16]byte{} {
		trace = hex.EncodeToString(ev.TraceID[:])
	}
	if ev.SpanID != [8]byte{} {
		span = hex.EncodeToString(ev.SpanID[:])
	}
	return trace, span
}

// TestMapTrace: a map's trace field gives an event its ids from a traceparent, a 128-bit or a
// 64-bit trace id, with the span field's id; anything else gives none and refuses nothing.
// The lines go through one decoder, in order, each without ids right after one with: no
// line's ids are another's.
func TestMapTrace(t *testing.T) {
	const (
		tid  = "4bf92f3577b34da6a3ce929d0e0e4736"
		sid  = "00f067aa0ba902b7"
		tp   = "00-" + tid + "-" + sid + "-01"
		sid2 = "b7ad6b7169203331"
	)
	m := Map{Metrics: []MapMetric{
		{Metric: "latency_ms", Value: MapValue{Field: "d"}, Key: MapKey{Field: "k"}, Trace: MapTrace{Field: "http.traceparent", Span: "span_id"}},
		{Metric: "bytes_sent", Value: MapValue{Field: "b"}, Key: MapKey{Field: "k"}}, // no trace: no ids
	}}
	md, err := NewMapDecoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	line := func(trace, span string) string {
		s := `{"k":"pay","d":3,"b":10`
		if trace != "" {
			s += `,"http":{"traceparent":` + trace + `}`
		}
		if span != "" {
			s += `,"span_id":` + span
		}
		return s + "}"
	}
	q := func(s string) string { return `"` + s + `"` }
	for _, c := range []struct {
		trace, span       string // the members' JSON values; "" for absent
		wantTrace, wantSp string
	}{
		{q(tp), "", tid, sid},
		{"", "", "", ""},
		{q(strings.ToUpper(tp)), "", tid, sid},
		{q("01-" + tid + "-" + sid + "-09-later-fields"), "", tid, sid}, // a later version may go on
		{q(tid), "", tid, ""},
		{q(strings.ToUpper(tid)), q(strings.ToUpper(sid2)), tid, sid2},
		{q("a3ce929d0e0e4736"), "", "0000000000000000a3ce929d0e0e4736", ""}, // B3/Zipkin 64-bit: the last 8 bytes
		{q("a3ce929d0e0e4736"), q(sid2), "0000000000000000a3ce929d0e0e4736", sid2},
		{q(tp), q(sid2), tid, sid2},              // the span field wins
		{q(tp), q("xyz"), tid, sid},              // an invalid span: the traceparent's
		{q(tid), q("0000000000000000"), tid, ""}, // a span of zeros is none
		{q(tp), q("0000000000000000"), tid, sid}, // a span of zeros is none: the traceparent's
		{q(tid), q(sid2 + "0"), tid, ""},         // 17 digits
		{q(tid), "12", tid, ""},                  // not a string
		{"null", q(sid2), "", ""},                // a span without a trace: none
		{q(""), "", "", ""},
		{q("00000000000000000000000000000000"), q(sid2), "", ""}, // all-zero trace id: none
		{q("0000000000000000"), "", "", ""},
		{q(tid[1:]), "", "", ""},                                              // 31 digits
		{q(tid + "0"), "", "", ""},                                            // 33
		{q(tid[:31] + "g"), "", "", ""},                                       // not hex
		{q("a3ce929d0e0e473-"), "", "", ""},                                   // not hex, 16 bytes
		{q("\\u0034" + tid[1:]), q("\\u0062" + sid2[1:]), tid, sid2},          // escapes decoded
		{"1234", "", "", ""},                                                  // a number
		{`{"id":"` + tid + `"}`, "", "", ""},                                  // an object
		{q("ff-" + tid + "-" + sid + "-01"), "", "", ""},                      // version ff
		{q(tp + "-x"), "", "", ""},                                            // version 00 is 55 bytes
		{q("01-" + tid + "-" + sid + "-01x"), "", "", ""},                     // after the flags: a '-'
		{q("00-" + tid + "-0000000000000000-01"), "", "", ""},                 // a parent id of zeros
		{q("00-" + tid + "-" + sid + "-0g"), "", "", ""},                      // flags not hex
		{q("00_" + tid + "-" + sid + "-01"), "", "", ""},                      // not dashes
		{q("0x-" + tid + "-" + sid + "-01"), "", "", ""},                      // version not hex
		{q("00-" + tid[:31] + "x-" + sid + "-01"), "", "", ""},                // trace id not hex
		{q("00-" + tid + "-" + sid[:15] + "x-01"), "", "", ""},                // span id not hex
		{q("00-00000000000000000000000000000000-" + sid + "-01"), "", "", ""}, // all-zero trace id
		{q(tp), "", tid, sid},
	} {
		l := line(c.trace, c.span)
		got := decodeAll(md, l, 42)
		if len(got) != 2 || got[0].r != ReasonNone || got[1].r != ReasonNone || got[0].ev.Value != 3 || got[1].ev.Value != 10 {
			t.Fatalf("%s: %+v, want two events accepted", l, got)
		}
		if tr, sp := idsHex(got[0].ev); tr != c.wantTrace || sp != c.wantSp {
			t.Errorf("%s: ids %q %q, want %q %q", l, tr, sp, c.wantTrace, c.wantSp)
		}
		if tr, sp := idsHex(got[1].ev); tr != "" || sp != "" {
			t.Errorf("%s: a metric without a trace has ids %q %q", l, tr, sp)
		}
	}
	// A refused event carries no ids: only an accepted one reaches an exemplar.
	got := decodeAll(md, `{"k":"pay","d":"slow","b":1,"http":{"traceparent":"`+tp+`"}}`, 42)
	if len(got) != 2 || got[0].r != ReasonBadField || got[0].ev.TraceID != [16]byte{} || got[1].r != ReasonNone {
		t.Errorf("refused: %+v", got)
	}
}

// A trace field shared by metrics, or a field that is also a label, is read for each.
func TestMapTraceShared(t *testing.T) {
	tr := MapTrace{Field: "trace_id"}
	m := Map{Metrics: []MapMetric{
		{Metric: "a", Value: MapValue{Field: "v"}, Key: MapKey{Field: "k"}, Trace: tr, Labels: []MapLabel{{Name: "trace", Field: "trace_id"}}},
		{Metric: "b", Value: MapValue{Field: "v"}, Key: MapKey{Field: "k"}, Trace: tr, Labels: []MapLabel{{Name: "trace", Field: "trace_id"}}},
	}}
	md, err := NewMapDecoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAll(md, `{"k":"x","v":1,"trace_id":"463ac35c9f6413ad"}`, 0)
	for _, g := range got {
		if tr, _ := idsHex(g.ev); g.r != ReasonNone || tr != "0000000000000000463ac35c9f6413ad" || g.ev.Key != seriesOf(t, "x", "trace", "463ac35c9f6413ad") {
			t.Errorf("%+v: trace %q", g, tr)
		}
	}
}

// TestMapTraceAllocs: reading a trace allocates nothing.
func TestMapTraceAllocs(t *testing.T) {
	m, _ := Preset("envoy")
	for i := range m.Metrics {
		m.Metrics[i].Trace = MapTrace{Field: "traceparent", Span: "span_id"}
	}
	md, err := NewMapDecoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	line := envoyLine("2026-12-02T09:05:00.123Z", "GET", "/pay", "200", "-", 466, 3, "c")
	body := []byte(line[:len(line)-1] + `,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","span_id":"b7ad6b7169203331"}`)
	n := 0
	fn := func(_ []byte, ev window.Event, r Reason) {
		if r == ReasonNone && ev.SpanID == [8]byte{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31} {
			n++
		}
	}
	md.DecodeLines(body, 0, fn)
	if a := testing.AllocsPerRun(200, func() { md.DecodeLines(body, 0, fn) }); a != 0 || n != 2*202 {
		t.Errorf("%.1f allocations a line, %d events with ids (want 0, %d)", a, n, 2*202)
	}
}
