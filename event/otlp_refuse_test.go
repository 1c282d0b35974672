package event

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/window"
)

// oneSpan is a request of one service's spans, each made by a func.
func oneSpan(service string, spans ...func(ptrace.Span)) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if service != "" {
		rs.Resource().Attributes().PutStr("service.name", service)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	for _, f := range spans {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("GET /pay")
		sp.SetStartTimestamp(pcommon.Timestamp(defTS * 1e6))
		sp.SetEndTimestamp(pcommon.Timestamp(defTS*1e6 + 2_500_000))
		f(sp)
	}
	return td
}

func protoOf(t testing.TB, td ptrace.Traces) []byte {
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonOf(t testing.TB, td ptrace.Traces) []byte {
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each refusal of a span names its reason and says what, in both formats; a body that is
// not a request is refused whole.
func TestOTLPRefusals(t *testing.T) {
	ok := func(ptrace.Span) {}
	nested := func(sp ptrace.Span) {
		s := sp.Attributes().PutEmptySlice("deep")
		for range 40 {
			s = s.AppendEmpty().SetEmptySlice()
		}
	}
	cases := []struct {
		name   string
		td     ptrace.Traces
		reason Reason
		detail string
	}{
		{"no service.name", oneSpan("", ok), ReasonMissingField, `resource attribute "service.name": absent`},
		{"end before start", oneSpan("pay", func(sp ptrace.Span) { sp.SetEndTimestamp(pcommon.Timestamp(defTS*1e6 - 1_000_000)) }), ReasonInvalidValue, "end before start by 1ms"},
		{"span name not UTF-8", oneSpan("pay", func(sp ptrace.Span) { sp.SetName("GET \xff") }), ReasonBadField, `label "span_name": value not valid UTF-8, or holds a control or bidi character`},
		{"service.name too long", oneSpan(strings.Repeat("s", 300), ok), ReasonKeyTooLong, `resource attribute "service.name": 300 bytes, more than 256`},
		{"route too long", oneSpan("pay", func(sp ptrace.Span) { sp.Attributes().PutStr("http.route", strings.Repeat("r", 257)) }), ReasonKeyTooLong, `label "http_route": value of 257 bytes, more than 256`},
		{"unknown kind", oneSpan("pay", func(sp ptrace.Span) { sp.SetKind(9) }), ReasonBadField, "span kind 9: not an OTLP SpanKind"},
		{"deep AnyValue", oneSpan("pay", nested), ReasonBadRecord, "AnyValue nested deeper than 32"},
	}
	cfg := SpanConfig{Dimensions: []string{"http.route"}}
	for _, json := range []bool{false, true} {
		for _, tc := range cases {
			f, _ := newSpanDecoder(cfg, json)
			body := protoOf(t, tc.td)
			if json {
				body = jsonOf(t, tc.td)
			}
			n := f.DecodeLines(body, 0, func(part []byte, ev window.Event, r Reason) {
				if r != tc.reason {
					t.Errorf("%s (json %v): %v, want %v", tc.name, json, r, tc.reason)
				}
				if why := f.Explain(part); !strings.HasPrefix(why, tc.detail) {
					t.Errorf("%s (json %v): Explain = %q, want %q", tc.name, json, why, tc.detail)
				}
				want := "span 1"
				if r == ReasonBadRecord {
					want = "the record"
				}
				if got := f.Where(body, part); got != want {
					t.Errorf("%s (json %v): Where = %q, want %q", tc.name, json, got, want)
				}
			})
			if n != 1 {
				t.Errorf("%s (json %v): %d events, want 1", tc.name, json, n)
			}
		}
	}
	good := protoOf(t, oneSpan("pay", ok, ok))
	malformed := map[string][]byte{
		"truncated":         good[:len(good)-3],
		"length past":       append([]byte{0x0a, 0x7f}, good...),
		"group":             {0x0b},
		"field 0":           {0x00, 0x01},
		"wrong wire type":   {0x08, 0x01},
		"varint of 11":      {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"json in the proto": jsonOf(t, oneSpan("pay", ok)),
	}
	for name, body := range malformed {
		f, _ := NewOTLPProto(SpanConfig{})
		got := decodeSpans(t, f, body)
		if len(got) != 1 || got[0].r != ReasonBadRecord {
			t.Errorf("%s: %+v, want one bad_record", name, got)
			continue
		}
		if why := f.Explain(body); !strings.HasPrefix(why, "malformed protobuf: ") || !strings.Contains(why, " at byte ") {
			t.Errorf("%s: Explain = %q", name, why)
		}
	}
	for name, body := range map[string]string{
		"not JSON":    `{"resourceSpans":[`,
		"time 1.5":    `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a"}}]},"scopeSpans":[{"spans":[{"name":"x","startTimeUnixNano":"1.5"}]}]}]}`,
		"trailing":    `{} {}`,
		"array":       `[]`,
		"kind name":   `{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SERVER"}]}]}]}`,
		"string attr": `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":5}}]}}]}`,
		"deep":        `{"resourceSpans":[{"bogus":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}]}`,
	} {
		f, _ := NewOTLPJSON(SpanConfig{})
		got := decodeSpans(t, f, []byte(body))
		if len(got) != 1 || got[0].r != ReasonBadRecord || f.Explain([]byte(body)) == "" {
			t.Errorf("%s: %+v (%q), want one bad_record", name, got, f.Explain([]byte(body)))
		}
	}
	// Valid JSON nested past what any reader of slide's takes is refused as that, not as
	// invalid JSON.
	deep := `{"resourceSpans":[{"bogus":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}]}`
	f, _ := NewOTLPJSON(SpanConfig{})
	if why := f.Explain([]byte(deep)); why != "JSON objects and arrays nested deeper than 10000 levels at byte 27" {
		t.Errorf("nested past 10000: Explain = %q", why)
	}
	// What pdata's reader takes beside what its writer writes: protobuf names, numbers for
	// times, enums by name, members in any order, null.
	got := decodeSpans(t, f, []byte(`{"resource_spans":[{"scope_spans":[{"spans":[{"name":"x","kind":"SPAN_KIND_CLIENT","start_time_unix_nano":1764489600000000000,
		"endTimeUnixNano":"1764489600002000000","status":{"code":"STATUS_CODE_ERROR"},"events":null}]}],
		"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a\u00e9"}}]}}]}`))
	want, _ := window.AppendSeries(nil, "aé", []window.Label{{Name: "span_kind", Value: "SPAN_KIND_CLIENT"}, {Name: "span_name", Value: "x"}, {Name: "status_code", Value: "STATUS_CODE_ERROR"}})
	if len(got) != 1 || got[0].r != ReasonNone || got[0].ev.Key != string(want) || got[0].ev.Value != 2 || got[0].ev.TS != defTS+2 {
		t.Fatalf("pdata's reader's shapes: %+v, want key %q", got, want)
	}
}

// Through the intake, a refusal of a span says where it is and what: the format's detail, or
// the store's judgement of the span's end.
func TestOTLPIntakeFirst(t *testing.T) {
	st, _ := window.NewStore(window.StoreConfig{})
	in, err := NewIntake(st, Config{}, WithFormat(func() (Format, error) { return NewOTLPProto(SpanConfig{}) }))
	if err != nil {
		t.Fatal(err)
	}
	old := func(sp ptrace.Span) {
		sp.SetStartTimestamp(pcommon.Timestamp((defTS - 7_200_000) * 1e6))
		sp.SetEndTimestamp(pcommon.Timestamp((defTS - 7_200_000) * 1e6))
	}
	back := func(sp ptrace.Span) { sp.SetStartTimestamp(pcommon.Timestamp(defTS*1e6 + 5e6)) }
	res := in.Take(protoOf(t, oneSpan("pay", func(ptrace.Span) {}, old, back)), defTS+1000)
	if res.Accepted != 1 || res.Refused[ReasonLate] != 1 || res.Refused[ReasonInvalidValue] != 1 {
		t.Fatalf("Take = %+v", res)
	}
	if got := res.First[ReasonLate]; got != "span 2: ts 2025-11-30T06:00:00Z is 2h0m1s behind now (retention 5m0s)" {
		t.Errorf("late: %q", got)
	}
	if got := res.First[ReasonInvalidValue]; got != "span 3: end before start by 2.5ms" {
		t.Errorf("invalid_value: %q", got)
	}
	// A span whose times were written in microseconds, not OTLP's nanoseconds: the hint
	// says so (it said "a ts in seconds where milliseconds are read").
	micro := func(sp ptrace.Span) {
		sp.SetStartTimestamp(pcommon.Timestamp(defTS * 1e3))
		sp.SetEndTimestamp(pcommon.Timestamp(defTS * 1e3))
	}
	res = in.Take(protoOf(t, oneSpan("pay", micro)), defTS+1000)
	if got := res.First[ReasonLate]; !strings.HasSuffix(got, ": 1000× too small, a ts in microseconds where nanoseconds are read?") {
		t.Errorf("a span in µs: %q", got)
	}
	res = in.Take([]byte("not a request"), defTS)
	if res.Refused[ReasonBadRecord] != 1 || !strings.HasPrefix(res.First[ReasonBadRecord], "the record: malformed protobuf: ") {
		t.Errorf("bad record: %+v", res)
	}
}

// checkSpans holds what f made of body to what any input must give: as many calls as
// DecodeLines says, parts of the body, accepted events of the span metric with a valid key and
// a finite duration ≥ 0, and a detail of one printable line for each refusal.
func checkSpans(t *testing.T, f *SpanDecoder, body []byte) []gotEvent {
	var out []gotEvent
	n := f.DecodeLines(body, 0, func(part []byte, ev window.Event, r Reason) {
		out = append(out, gotEvent{ev, r})
		whole, off := body[:cap(body)], cap(body)-cap(part)
		if len(part) == 0 || off < 0 || off+len(part) > len(body) || &whole[off] != &part[0] {
			t.Fatalf("part %q is not of the body", part)
		}
		if r == ReasonNone {
			if ev.Metric != SpanMetric || !window.ValidName(window.SeriesKeyOf(ev.Key)) || !(ev.Value >= 0) || ev.Count != 1 {
				t.Fatalf("accepted %+v", ev)
			}
			return
		}
		why := f.Explain(part)
		if why == "" || strings.ContainsAny(why, "\n\r") || !utf8.ValidString(why) {
			t.Fatalf("%v refused with detail %q", r, why)
		}
	})
	if n != len(out) {
		t.Fatalf("DecodeLines = %d, fn called %d times", n, len(out))
	}
	return out
}

func otlpSeeds(f *testing.F, enc func(testing.TB, ptrace.Traces) []byte) {
	f.Add(enc(f, testRequest(3)))
	f.Add(enc(f, oneSpan("pay", func(sp ptrace.Span) { sp.Attributes().PutEmptyMap("m").PutEmptySlice("s").AppendEmpty().SetDouble(1.5) })))
	f.Add(enc(f, oneSpan("", func(ptrace.Span) {})))
	f.Add([]byte{})
}

// FuzzOTLPProto: no input panics the protobuf reader or breaks checkSpans, and where pdata
// reads a request that the reader does not refuse whole, its events are the walk's over
// pdata's spans.
func FuzzOTLPProto(f *testing.F) {
	otlpSeeds(f, protoOf)
	dims := []string{"http.route", "http.response.status_code", "deployment.environment"}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, _ := NewOTLPProto(SpanConfig{Dimensions: dims})
		got := checkSpans(t, d, body)
		if len(got) == 1 && got[0].r == ReasonBadRecord {
			return
		}
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			return // pdata checks fields the scan skips
		}
		sameEvents(t, "fuzzed request", got, walkSpans(td, DefaultSpanKey, dims))
	})
}

// FuzzOTLPJSON: no input panics the JSON reader or breaks checkSpans, and a request it reads
// gives the events of its spans again when pdata writes it as protobuf.
func FuzzOTLPJSON(f *testing.F) {
	otlpSeeds(f, jsonOf)
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","kind":"SPAN_KIND_CLIENT"}]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a"}}]}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, _ := NewOTLPJSON(SpanConfig{Dimensions: []string{"http.route"}})
		got := checkSpans(t, d, body)
		// Not compared: escapes (jsoniter reads names and numbers in its own ways), and "" (pdata's
		// member loop ends at an empty name, and reads what follows as the next member).
		if len(got) == 1 && got[0].r == ReasonBadRecord || bytes.Contains(body, []byte(`\`)) || bytes.Contains(body, []byte(`""`)) {
			return
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			return
		}
		sameEvents(t, "fuzzed JSON request as pdata read it", got, walkSpans(td, DefaultSpanKey, []string{"http.route"}))
	})
}

// AppendOTLP writes what pdata reads as the spans given, and what the protobuf reader reads as
// pdata's spans say.
func TestAppendOTLP(t *testing.T) {
	code := int64(503)
	spans := []Span{
		{Name: "GET /pay", Kind: 2, Status: 2, Start: defTS * 1e6, End: defTS*1e6 + 1_500_000,
			Attrs: []SpanAttr{{Key: "http.route", Str: "/pay"}, {Key: "http.response.status_code", Int: &code}}},
		{Name: "db", Kind: 3, Start: defTS * 1e6, End: defTS*1e6 + 7},
	}
	body := AppendOTLP([]byte("keep"), "checkout", spans)
	if string(body[:4]) != "keep" {
		t.Fatal("AppendOTLP did not append")
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body[4:])
	if err != nil {
		t.Fatal(err)
	}
	rs := td.ResourceSpans().At(0)
	if svc, _ := rs.Resource().Attributes().Get("service.name"); svc.Str() != "checkout" || rs.ScopeSpans().At(0).Spans().Len() != 2 {
		t.Fatalf("pdata reads %d resources, service %q", td.ResourceSpans().Len(), svc.Str())
	}
	sp := rs.ScopeSpans().At(0).Spans().At(0)
	route, _ := sp.Attributes().Get("http.route")
	sc, _ := sp.Attributes().Get("http.response.status_code")
	if sp.Name() != "GET /pay" || sp.Kind() != ptrace.SpanKindServer || sp.Status().Code() != ptrace.StatusCodeError ||
		int64(sp.EndTimestamp()-sp.StartTimestamp()) != 1_500_000 || route.Str() != "/pay" || sc.Int() != 503 {
		t.Fatalf("pdata reads span %q kind %v status %v attrs %v", sp.Name(), sp.Kind(), sp.Status().Code(), sp.Attributes().AsRaw())
	}
	dims := []string{"http.route", "http.response.status_code"}
	d, _ := NewOTLPProto(SpanConfig{Dimensions: dims})
	sameEvents(t, "AppendOTLP's record", decodeSpans(t, d, body[4:]), walkSpans(td, DefaultSpanKey, dims))
}

// TestRefusalNamesTheOtherFormat: a topic of the other format is the usual cause of every
// record refused, and the refusal says so. slide's JSON read as otlp_proto was only
// "malformed protobuf: wire type 3 at byte 0"; an OTLP protobuf record read as slide's JSON,
// split at its 0x0a bytes, a refusal per line of "invalid JSON: no opening brace at byte 1".
func TestRefusalNamesTheOtherFormat(t *testing.T) {
	f, _ := newSpanDecoder(SpanConfig{}, false)
	body := []byte(`{"ts":1764489600123,"key":"tenant-1","metric":"latency_ms","value":5}`)
	f.DecodeLines(body, 0, func(part []byte, _ window.Event, r Reason) {
		if why := f.Explain(part); r != ReasonBadRecord || !strings.Contains(why, "JSON text, not protobuf") {
			t.Errorf("slide JSON as otlp_proto: %v %q; want bad_record saying it is JSON text", r, why)
		}
	})
	d, err := NewDecoder(Config{})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	d.DecodeLines(protoOf(t, oneSpan("pay", func(ptrace.Span) {})), defTS, func(line []byte, _ window.Event, r Reason) {
		if r == ReasonNone {
			return
		}
		refused++
		if why := d.Explain(line); !strings.Contains(why, "binary, not JSON text") {
			t.Errorf("a line of OTLP protobuf as slide JSON: %q; want it called binary", why)
		}
	})
	if refused == 0 {
		t.Fatal("the protobuf record was not refused")
	}
}
