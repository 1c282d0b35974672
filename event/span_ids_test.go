package event

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/translator/zipkin/zipkinv2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/slide-metrics/slide/window"
)

// A span's event carries the span's trace and span ids (window.Event.TraceID, SpanID), in
// every span format; a span without ids, or with invalid ones, has none, and is kept.

var (
	tidA  = pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sidA  = pcommon.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	tidB  = pcommon.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	sidB  = pcommon.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}
	tid64 = pcommon.TraceID{8: 0x46, 0x3a, 0xc3, 0x5c, 0x9f, 0x64, 0x13, 0xad} // a 64-bit id, as Zipkin's
)

// wantIDs are a span's ids as its event must carry them.
type wantIDs struct {
	trace [16]byte
	span  [8]byte
}

// idRequest is a request of one series' spans, each with its ids: ids and a parent (the
// layout pdata writes for most spans), ids without a parent, none after spans with ids, a
// trace id alone, a 64-bit trace id, and none again. The span without ids is the slowest.
func idRequest() (ptrace.Traces, []wantIDs) {
	type spanIDs struct {
		t      pcommon.TraceID
		s, par pcommon.SpanID
		ms     uint64
	}
	spans := []spanIDs{
		{tidA, sidA, pcommon.SpanID{1}, 3},
		{tidB, sidB, pcommon.SpanID{}, 4},
		{pcommon.TraceID{}, pcommon.SpanID{}, pcommon.SpanID{}, 9},
		{tidB, pcommon.SpanID{}, pcommon.SpanID{}, 2},
		{tid64, sidA, sidB, 5},
		{pcommon.TraceID{}, pcommon.SpanID{}, pcommon.SpanID{}, 1},
	}
	var want []wantIDs
	var fns []func(ptrace.Span)
	for _, c := range spans {
		want = append(want, wantIDs{c.t, c.s})
		fns = append(fns, func(sp ptrace.Span) {
			sp.SetTraceID(c.t)
			sp.SetSpanID(c.s)
			sp.SetParentSpanID(c.par)
			sp.SetEndTimestamp(sp.StartTimestamp() + pcommon.Timestamp(c.ms*1e6))
		})
	}
	return oneSpan("checkout", fns...), want
}

// sameIDs checks that got are the events of one series, accepted, with the ids want.
func sameIDs(t *testing.T, what string, got []gotEvent, want []wantIDs) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i, g := range got {
		if g.r != ReasonNone || g.ev.Key != got[0].ev.Key {
			t.Fatalf("%s: span %d refused (%v) or of another series (%q, not %q)", what, i+1, g.r, g.ev.Key, got[0].ev.Key)
		}
		if g.ev.TraceID != want[i].trace || g.ev.SpanID != want[i].span {
			t.Errorf("%s: span %d ids %x %x, want %x %x", what, i+1, g.ev.TraceID, g.ev.SpanID, want[i].trace, want[i].span)
		}
	}
}

// TestOTLPSpanIDs: what pdata writes, as protobuf (by the fast paths, and field by field in
// the long form) and as JSON, gives each span's event the span's ids, and a span without ids
// none, though a span of its series with ids came before it.
func TestOTLPSpanIDs(t *testing.T) {
	td, want := idRequest()
	pd, _ := NewOTLPProto(SpanConfig{})
	jd, _ := NewOTLPJSON(SpanConfig{})
	pb := protoOf(t, td)
	for range 2 { // the second time, the series is interned and its parts cached
		sameIDs(t, "otlp_proto", decodeSpans(t, pd, pb), want)
		sameIDs(t, "otlp_proto, long form", decodeSpans(t, pd, longForm(t, nil, pb, pbRequest)), want)
		sameIDs(t, "otlp_json", decodeSpans(t, jd, jsonOf(t, td)), want)
	}
}

// TestSpanIDsReachTheStore: the events Intake.Take hands the store (ObserveAtAll, as POST
// /v1/traces) and TakeRecord (ObserveFromAll) carry the ids: the exemplar is the slowest span
// with ids, not the slower one without (which would carry the ids before it, had they leaked).
func TestSpanIDsReachTheStore(t *testing.T) {
	td, _ := idRequest()
	for _, c := range []struct {
		format string
		newDec func(SpanConfig) (*SpanDecoder, error)
		body   []byte
	}{
		{"otlp_proto", NewOTLPProto, protoOf(t, td)},
		{"otlp_json", NewOTLPJSON, jsonOf(t, td)},
	} {
		for _, record := range []bool{false, true} {
			st, err := window.NewStore(window.StoreConfig{Exemplars: true})
			if err != nil {
				t.Fatal(err)
			}
			in, err := NewIntake(st, Config{}, WithFormat(func() (Format, error) { return c.newDec(SpanConfig{}) }))
			if err != nil {
				t.Fatal(err)
			}
			now := defTS + 1000
			if record {
				f, _ := c.newDec(SpanConfig{})
				if n, _ := in.TakeRecord(f, c.body, now, Record{TS: now}, func([]byte, Reason) { t.Fatal("a span refused") }); n != 6 {
					t.Fatalf("%s record: %d spans accepted", c.format, n)
				}
			} else if res := in.Take(c.body, now); res.Accepted != 6 {
				t.Fatalf("%s: %+v", c.format, res)
			}
			var got []window.Exemplar
			st.VisitExemplars(now, SpanMetric, nil, nil, nil, func(_ string, ex []window.Exemplar) bool {
				got = append(got, ex...)
				return true
			})
			want := window.Exemplar{TS: defTS + 5, Value: 5, TraceID: tid64, SpanID: sidA}
			if len(got) != 1 || got[0] != want {
				t.Errorf("%s (record %v): exemplars %+v, want %+v", c.format, record, got, want)
			}
		}
	}
}

// zipkinIDRecords are idRequest's spans with ids as the Collector's zipkin_json and
// zipkin_proto marshalers write them, each followed by a copy of its first span without ids
// (which the marshalers do not write: zipkin-go's reporters never send one, but slide reads it).
func zipkinIDRecords(t *testing.T) (jsonBody, protoBody []byte, want []wantIDs) {
	td, all := idRequest()
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	k := 0
	noIDs := func(w wantIDs) bool { return w.trace == [16]byte{} || w.span == [8]byte{} } // the marshalers refuse such a span
	spans.RemoveIf(func(ptrace.Span) bool { k++; return noIDs(all[k-1]) })
	for _, w := range all {
		if !noIDs(w) {
			want = append(want, w)
		}
	}
	want = append(want, wantIDs{})
	jb, err := zipkinv2.NewJSONTracesMarshaler().MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	first := regexp.MustCompile(`^\[(\{.*?"traceId".*?\})(,\{|\]$)`).FindSubmatch(jb)
	if first == nil {
		t.Fatalf("no first span in %s", jb)
	}
	bare := regexp.MustCompile(`"(traceId|id|parentId)":"[0-9a-f]*",?`).ReplaceAll(first[1], nil)
	if bytes.Contains(bare, []byte("Id")) || !bytes.Contains(bare, []byte(`"timestamp"`)) {
		t.Fatalf("the first span less its ids: %s", bare)
	}
	jsonBody = append(append(append(jb[:len(jb)-1:len(jb)-1], ','), bare...), ']')

	pb, err := zipkinv2.NewProtobufTracesMarshaler().MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	_, _, tl := protowire.ConsumeTag(pb) // ListOfSpans: spans = 1
	body, m := protowire.ConsumeBytes(pb[max(tl, 0):])
	if tl < 0 || m < 0 {
		t.Fatal("no first span in the proto3 record")
	}
	var stripped []byte
	for len(body) > 0 {
		num, _, fl := protowire.ConsumeField(body)
		if fl < 0 {
			t.Fatal("a malformed span")
		}
		if num > 3 { // trace_id = 1, parent_id = 2, id = 3
			stripped = append(stripped, body[:fl]...)
		}
		body = body[fl:]
	}
	protoBody = protowire.AppendBytes(protowire.AppendTag(pb, 1, protowire.BytesType), stripped)
	return jsonBody, protoBody, want
}

// TestZipkinSpanIDs: Zipkin's JSON and proto3, as the Collector writes them, give each span's
// event the span's ids (a 64-bit trace id the last 8 bytes, as the Collector's receiver
// reads it), and a span without ids none.
func TestZipkinSpanIDs(t *testing.T) {
	jb, pb, want := zipkinIDRecords(t)
	jd, _ := NewZipkinJSON(SpanConfig{})
	pd, _ := NewZipkinProto(SpanConfig{})
	for range 2 {
		sameIDs(t, "zipkin_json", decodeSpans(t, jd, jb), want)
		sameIDs(t, "zipkin_proto", decodeSpans(t, pd, pb), want)
	}
}

// otlpRequest is an ExportTraceServiceRequest of service "pay", one span of name x, 1 ms long,
// for each of spanIDs, which are its id fields (protobuf).
func otlpRequest(spanIDs ...[]byte) []byte {
	kv := []byte{0x0a, 12, 's', 'e', 'r', 'v', 'i', 'c', 'e', '.', 'n', 'a', 'm', 'e', 0x12, 5, 0x0a, 3, 'p', 'a', 'y'}
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendBytes([]byte{0x0a}, kv))
	var ss []byte
	for _, ids := range spanIDs {
		sp := append([]byte{0x2a, 1, 'x', 0x39}, binary.LittleEndian.AppendUint64(nil, uint64(defTS)*1e6)...)
		sp = append(append(append(sp, 0x41), binary.LittleEndian.AppendUint64(nil, uint64(defTS)*1e6+1e6)...), ids...)
		ss = protowire.AppendBytes(append(ss, 0x12), sp)
	}
	rs = protowire.AppendBytes(protowire.AppendTag(rs, 2, protowire.BytesType), ss)
	return protowire.AppendBytes([]byte{0x0a}, rs)
}

// TestOTLPSpanIDsAbsent: a span without id fields (pdata writes empty ones) after a span with
// ids has none.
func TestOTLPSpanIDsAbsent(t *testing.T) {
	d, _ := NewOTLPProto(SpanConfig{})
	ids := append(protowire.AppendBytes([]byte{0x0a}, tidA[:]), protowire.AppendBytes([]byte{0x12}, sidA[:])...)
	sameIDs(t, "otlp_proto, the second span without id fields", decodeSpans(t, d, otlpRequest(ids, nil)), []wantIDs{{tidA, sidA}, {}})
}

// TestSpanIDsInvalid: an id of another length, type or text leaves the span's event without
// ids (an empty span id only the span id), and never refuses the span.
func TestSpanIDsInvalid(t *testing.T) {
	tid, sid := [16]byte(tidA), [8]byte(sidA)
	bytesField := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	otlpJSON := func(ids string) []byte {
		return fmt.Appendf(nil, `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"pay"}}]},`+
			`"scopeSpans":[{"spans":[{%s"name":"x","startTimeUnixNano":"%d","endTimeUnixNano":"%d"}]}]}]}`, ids, defTS*1e6, defTS*1e6+1e6)
	}
	zipkinJSON := func(ids string) []byte {
		return fmt.Appendf(nil, `[{%s"name":"x","timestamp":%d,"duration":1000,"localEndpoint":{"serviceName":"pay"}}]`, ids, defTS*1000)
	}
	zipkinProto := func(ids []byte) []byte {
		sp := append([]byte{0x2a, 1, 'x', 0x31}, binary.LittleEndian.AppendUint64(nil, uint64(defTS)*1000)...)
		sp = append(append(sp, 0x38, 0xe8, 0x07, 0x42, 5, 0x0a, 3, 'p', 'a', 'y'), ids...)
		return bytesField(1, sp)
	}
	const tidHex, sidHex = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	op, _ := NewOTLPProto(SpanConfig{})
	oj, _ := NewOTLPJSON(SpanConfig{})
	zj, _ := NewZipkinJSON(SpanConfig{})
	zp, _ := NewZipkinProto(SpanConfig{})
	for _, c := range []struct {
		what string
		d    *SpanDecoder
		body []byte
		want wantIDs
	}{
		{"otlp_proto: valid ids", op, otlpRequest(cat(bytesField(1, tid[:]), bytesField(2, sid[:]))), wantIDs{tid, sid}},
		{"otlp_proto: a trace id of 5 bytes", op, otlpRequest(cat(bytesField(1, tid[:5]), bytesField(2, sid[:]))), wantIDs{}},
		{"otlp_proto: a span id of 9 bytes", op, otlpRequest(cat(bytesField(2, append(sid[:], 1)), bytesField(1, tid[:]))), wantIDs{}},
		{"otlp_proto: a trace id of 200 bytes (the field-by-field path)", op, otlpRequest(cat(bytesField(1, make([]byte, 200)), bytesField(2, sid[:]))), wantIDs{}},
		{"otlp_proto: a trace id that is a varint", op, otlpRequest(cat([]byte{0x08, 7}, bytesField(2, sid[:]))), wantIDs{}},
		{"otlp_proto: a span id that is a fixed64", op, otlpRequest(cat(bytesField(1, tid[:]), []byte{0x11, 1, 2, 3, 4, 5, 6, 7, 8})), wantIDs{}},
		{"otlp_proto: an all-zero trace id", op, otlpRequest(cat(bytesField(1, make([]byte, 16)), bytesField(2, sid[:]))), wantIDs{}},
		{"otlp_proto: an empty span id", op, otlpRequest(cat(bytesField(1, tid[:]), bytesField(2, nil))), wantIDs{trace: tid}},
		{"otlp_json: valid ids, upper case", oj, otlpJSON(`"traceId":"4BF92F3577B34DA6A3CE929D0E0E4736","spanId":"00F067AA0BA902B7",`), wantIDs{tid, sid}},
		{"otlp_json: protobuf's names", oj, otlpJSON(`"trace_id":"` + tidHex + `","span_id":"` + sidHex + `",`), wantIDs{tid, sid}},
		{"otlp_json: a trace id of 31 digits", oj, otlpJSON(`"traceId":"` + tidHex[1:] + `","spanId":"` + sidHex + `",`), wantIDs{}},
		{"otlp_json: a span id not hex", oj, otlpJSON(`"traceId":"` + tidHex + `","spanId":"00f067aa0ba902bz",`), wantIDs{}},
		{"otlp_json: a trace id in base64", oj, otlpJSON(`"traceId":"S/kvNXezTaajzpKdDg5HNg==","spanId":"` + sidHex + `",`), wantIDs{}},
		{"otlp_json: a trace id that is a number", oj, otlpJSON(`"traceId":12,"spanId":"` + sidHex + `",`), wantIDs{}},
		{"otlp_json: an escaped trace id", oj, otlpJSON(`"traceId":"\u0034bf92f3577b34da6a3ce929d0e0e4736","spanId":"` + sidHex + `",`), wantIDs{}},
		{"otlp_json: null ids", oj, otlpJSON(`"traceId":null,"spanId":null,`), wantIDs{}},
		{"zipkin_json: a 128-bit trace id", zj, zipkinJSON(`"traceId":"` + tidHex + `","id":"` + sidHex + `",`), wantIDs{tid, sid}},
		{"zipkin_json: a 64-bit trace id", zj, zipkinJSON(`"traceId":"a3ce929d0e0e4736","id":"` + sidHex + `",`), wantIDs{[16]byte{8: 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}, sid}},
		{"zipkin_json: ids without their leading zeros, as zipkin-go reads them", zj, zipkinJSON(`"traceId":"1","id":"f067aa0ba902b7",`), wantIDs{[16]byte{15: 1}, sid}},
		{"zipkin_json: a trace id of 34 digits, two of them leading zeros", zj, zipkinJSON(`"traceId":"00` + tidHex + `","id":"` + sidHex + `",`), wantIDs{tid, sid}},
		{"zipkin_json: a trace id of 33 digits", zj, zipkinJSON(`"traceId":"1` + tidHex + `","id":"` + sidHex + `",`), wantIDs{}},
		{"zipkin_json: a span id not hex", zj, zipkinJSON(`"traceId":"` + tidHex + `","id":"x",`), wantIDs{}},
		{"zipkin_proto: a 64-bit trace id", zp, zipkinProto(cat(bytesField(1, tid[8:]), bytesField(3, sid[:]))), wantIDs{[16]byte{8: 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}, sid}},
		{"zipkin_proto: a 128-bit trace id", zp, zipkinProto(cat(bytesField(1, tid[:]), bytesField(2, []byte{9, 9, 9, 9, 9, 9, 9, 9}), bytesField(3, sid[:]))), wantIDs{tid, sid}},
		{"zipkin_proto: a trace id of 12 bytes", zp, zipkinProto(cat(bytesField(1, tid[:12]), bytesField(3, sid[:]))), wantIDs{}},
		{"zipkin_proto: an id that is a varint", zp, zipkinProto(cat(bytesField(1, tid[:]), []byte{0x18, 1})), wantIDs{}},
	} {
		got := checkSpans(t, c.d, c.body)
		if len(got) != 1 || got[0].r != ReasonNone {
			t.Errorf("%s: %+v, want the span accepted", c.what, got)
			continue
		}
		if got[0].ev.TraceID != c.want.trace || got[0].ev.SpanID != c.want.span {
			t.Errorf("%s: ids %x %x, want %x %x", c.what, got[0].ev.TraceID, got[0].ev.SpanID, c.want.trace, c.want.span)
		}
	}
}
