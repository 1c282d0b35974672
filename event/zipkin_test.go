package event

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/translator/zipkin/zipkinv2"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/window"
)

// zipkinDims are dimensions that are span attributes through the Collector's zipkin receiver
// (a resource attribute such as deployment.environment it takes from the first span of each
// service in a record, where the decoder takes each span's own).
var zipkinDims = []string{"http.route", "http.response.status_code", "sampled", "service.peer.name"}

// sortEvents orders events and refusals so that two decoders' may be compared as multisets:
// the Collector's zipkin receiver groups a record's spans by service.
func sortEvents(evs []gotEvent) []gotEvent {
	slices.SortFunc(evs, func(a, b gotEvent) int {
		return cmp.Or(cmp.Compare(a.r, b.r), strings.Compare(a.ev.Key, b.ev.Key), cmp.Compare(a.ev.TS, b.ev.TS), cmp.Compare(a.ev.Value, b.ev.Value))
	})
	return evs
}

// zipkinWant is what each span of a Zipkin JSON body must give: its events as the Collector's
// zipkin receiver reads the body (contrib's zipkinv2 translator) and slide's OTLP walk reads
// that, or ok false where the receiver refuses the body or gives a span without a timestamp
// or duration, which slide refuses (TestZipkinRefusals) and the receiver places at 1970.
func zipkinWant(body []byte, dims []string) (want []gotEvent, ok bool) {
	return zipkinWantOf(zipkinv2.NewJSONTracesUnmarshaler(false), body, dims)
}

// zipkinWantOf is zipkinWant through the receiver's unmarshaler u (JSON's or proto3's).
func zipkinWantOf(u ptrace.Unmarshaler, body []byte, dims []string) (want []gotEvent, ok bool) {
	td, err := u.UnmarshalTraces(body)
	if err != nil {
		return nil, false
	}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				if sp.StartTimestamp() == 0 || sp.EndTimestamp() <= sp.StartTimestamp() {
					return nil, false
				}
			}
		}
	}
	return walkSpans(td, DefaultSpanKey, dims), true
}

// TestZipkinDifferential: random traces written by the Collector's zipkin_json and
// zipkin_proto marshalers (the kafka exporter's, through zipkin-go's encoders) give each span
// the event the Collector's zipkin receiver and the OTLP walk give it, refusals included.
func TestZipkinDifferential(t *testing.T) {
	for _, c := range []struct {
		format string
		newDec func(SpanConfig) (*SpanDecoder, error)
		m      ptrace.Marshaler
		u      ptrace.Unmarshaler
	}{
		{"zipkin_json", NewZipkinJSON, zipkinv2.NewJSONTracesMarshaler(), zipkinv2.NewJSONTracesUnmarshaler(false)},
		{"zipkin_proto", NewZipkinProto, zipkinv2.NewProtobufTracesMarshaler(), zipkinv2.NewProtobufTracesUnmarshaler(false, false)},
	} {
		r := rand.New(rand.NewPCG(9, 411))
		d, err := c.newDec(SpanConfig{Dimensions: zipkinDims})
		if err != nil {
			t.Fatal(err)
		}
		bodies, spans := 0, 0
		for i := range 400 {
			body, err := c.m.MarshalTraces(measurable(randomTraces(r)))
			if err != nil {
				t.Fatal(err)
			}
			want, ok := zipkinWantOf(c.u, body, zipkinDims)
			if !ok {
				continue
			}
			bodies, spans = bodies+1, spans+len(want)
			sameEvents(t, fmt.Sprintf("%s record %d", c.format, i), sortEvents(decodeSpans(t, d, body)), sortEvents(want))
		}
		if bodies < 300 || spans < 3000 {
			t.Fatalf("%s: only %d records of %d spans compared", c.format, bodies, spans)
		}
	}
}

// measurable makes every span of td end after its start, as Zipkin's JSON holds them (its
// duration is unsigned), with ids and annotations' times.
func measurable(td ptrace.Traces) ptrace.Traces {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				if sp.EndTimestamp() <= sp.StartTimestamp() {
					sp.SetEndTimestamp(sp.StartTimestamp() + 1500)
				}
				tid, sid := sp.TraceID(), sp.SpanID()
				tid[15], sid[7] = 1, 1 // ids the exporter takes (all zeros are none)
				sp.SetTraceID(tid)
				sp.SetSpanID(sid)
				for _, ev := range sp.Events().All() {
					ev.SetTimestamp(sp.StartTimestamp()) // an annotation needs its time
				}
			}
		}
	}
	return td
}

// One Zipkin span as reporters write it (zipkin-go's model, through zipkin-reporter's JSON).
const zipkinSpan = `{"traceId":"5af7183fb1d4cf5f","id":"352bff9a74ca9ad2","kind":"SERVER","name":"get /pay",` +
	`"timestamp":1764489600123000,"duration":1500,"localEndpoint":{"serviceName":"checkout","ipv4":"10.0.0.1"},` +
	`"tags":{"http.route":"/pay","http.method":"GET"}}`

// TestZipkinSpan: the fields of a span become its event as the package doc says.
func TestZipkinSpan(t *testing.T) {
	dims := []string{"http.route", "http.status_code", "tenant", "http.response.status_code", "service.peer.name"}
	d, err := NewZipkinJSON(SpanConfig{Dimensions: dims})
	if err != nil {
		t.Fatal(err)
	}
	series := func(svc string, kvs ...string) string {
		var ls []window.Label
		for i := 0; i < len(kvs); i += 2 {
			ls = append(ls, window.Label{Name: kvs[i], Value: kvs[i+1]})
		}
		window.SortLabels(ls)
		s, err := window.AppendSeries(nil, svc, ls)
		if err != nil {
			t.Fatal(err)
		}
		return string(s)
	}
	for _, c := range []struct {
		what, span string
		want       window.Event
	}{
		{"a server span", zipkinSpan, window.Event{Metric: SpanMetric, Value: 1.5, Count: 1, TS: 1764489600124,
			Key:     series("checkout", "span_name", "get /pay", "span_kind", "SPAN_KIND_SERVER", "status_code", "STATUS_CODE_UNSET", "http_route", "/pay"),
			TraceID: [16]byte{8: 0x5a, 0xf7, 0x18, 0x3f, 0xb1, 0xd4, 0xcf, 0x5f}, SpanID: [8]byte{0x35, 0x2b, 0xff, 0x9a, 0x74, 0xca, 0x9a, 0xd2}}},
		{"no kind, an error tag of any value, a number tag (also http.response.status_code), a tag given twice, a remote service",
			`{"name":"db","timestamp":1764489600123000,"duration":250,"localEndpoint":{"serviceName":"payments"},"remoteEndpoint":{"serviceName":"postgres"},"tags":{"error":"timeout","http.status_code":503,"tenant":"a","tenant":"b"}}`,
			window.Event{Metric: SpanMetric, Value: 0.25, Count: 1, TS: 1764489600123,
				Key: series("payments", "span_name", "db", "span_kind", "SPAN_KIND_UNSPECIFIED", "status_code", "STATUS_CODE_ERROR", "http_status_code", "503",
					"http_response_status_code", "503", "tenant", "b", "service_peer_name", "postgres")}},
		{"http.response.status_code given beside http.status_code, before it",
			`{"name":"db","timestamp":1764489600123000,"duration":250,"localEndpoint":{"serviceName":"payments"},"tags":{"http.response.status_code":"404","http.status_code":"500"}}`,
			window.Event{Metric: SpanMetric, Value: 0.25, Count: 1, TS: 1764489600123,
				Key: series("payments", "span_name", "db", "span_kind", "SPAN_KIND_UNSPECIFIED", "status_code", "STATUS_CODE_UNSET", "http_status_code", "500",
					"http_response_status_code", "404")}},
		{"span.kind=internal, otel.status_code Ok, an escaped tag name",
			`{"name":"render","timestamp":1764489600123000,"duration":1,"localEndpoint":{"serviceName":"web"},"tags":{"span.kind":"internal","otel.status_code":"Ok","\u0074enant":"c"}}`,
			window.Event{Metric: SpanMetric, Value: 0.001, Count: 1, TS: 1764489600123,
				Key: series("web", "span_name", "render", "span_kind", "SPAN_KIND_INTERNAL", "status_code", "STATUS_CODE_OK", "tenant", "c")}},
		{"a CLIENT kind and STATUS_CODE_ERROR",
			`{"kind":"CLIENT","name":"call","timestamp":1764489600123000,"duration":2000,"localEndpoint":{"serviceName":"web"},"tags":{"otel.status_code":"STATUS_CODE_ERROR"}}`,
			window.Event{Metric: SpanMetric, Value: 2, Count: 1, TS: 1764489600125,
				Key: series("web", "span_name", "call", "span_kind", "SPAN_KIND_CLIENT", "status_code", "STATUS_CODE_ERROR")}},
	} {
		got := checkSpans(t, d, []byte("["+c.span+"]"))
		if len(got) != 1 || got[0].r != ReasonNone || got[0].ev != c.want {
			t.Errorf("%s: got %+v, want %+v", c.what, got, c.want)
		}
	}
}

// TestZipkinRefusals: a span that cannot be measured is refused with what it lacks, and a body
// of another format is refused whole with a hint at the right one.
func TestZipkinRefusals(t *testing.T) {
	d, err := NewZipkinJSON(SpanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, body string
		r          Reason
		why        string
	}{
		{"no timestamp", `[{"name":"x","duration":5,"localEndpoint":{"serviceName":"a"}}]`, ReasonMissingField, `no "timestamp"`},
		{"no duration", `[{"name":"x","timestamp":1764489600123000,"localEndpoint":{"serviceName":"a"}}]`, ReasonMissingField, `no "duration"`},
		{"a zero duration", `[{"name":"x","timestamp":1764489600123000,"duration":0,"localEndpoint":{"serviceName":"a"}}]`, ReasonMissingField, `no "duration"`},
		{"no service", `[{"name":"x","timestamp":1764489600123000,"duration":5,"localEndpoint":{"ipv4":"10.0.0.1"},"tags":{"service.name":"b"}}]`, ReasonMissingField, `"service.name": absent`},
		{"past 2262", `[{"name":"x","timestamp":18446744073709551,"duration":5,"localEndpoint":{"serviceName":"a"}}]`, ReasonInvalidValue, "past year 2262"},
		{"Zipkin v1", `[{"traceId":"1","id":"2","name":"x","annotations":[],"binaryAnnotations":[{"key":"http.path","value":"/"}]}]`, ReasonBadRecord, "Zipkin v1 JSON"},
		{"a float duration", `[{"name":"x","timestamp":1764489600123000,"duration":1.5}]`, ReasonBadRecord, "Zipkin JSON: not a uint64"},
		{"OTLP/JSON", `{"resourceSpans":[]}`, ReasonBadRecord, "--event-format otlp_json"},
		{"not JSON", "\x0a\x02\x08\x01", ReasonBadRecord, "Zipkin JSON: not an array"},
		{"nested past 10000", `[{"name":"x","bogus":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}]`, ReasonBadRecord, "JSON objects and arrays nested deeper than 10000 levels at byte 21"},
	} {
		got := checkSpans(t, d, []byte(c.body))
		if len(got) != 1 || got[0].r != c.r {
			t.Errorf("%s: %+v, want one %v", c.what, got, c.r)
			continue
		}
		if why := d.Explain([]byte(c.body)); !strings.Contains(why, c.why) {
			t.Errorf("%s: explained %q, want it to say %q", c.what, why, c.why)
		}
	}
	o, _ := NewOTLPJSON(SpanConfig{})
	if why := o.Explain([]byte(`[` + zipkinSpan + `]`)); !strings.Contains(why, "--event-format zipkin_json") {
		t.Errorf("a Zipkin list read as otlp_json: %q, want a hint at zipkin_json", why)
	}
}

// FuzzZipkinJSON: no input panics the Zipkin reader or breaks checkSpans, and a body the
// Collector's zipkin receiver reads (escapes and invalid UTF-8 aside, which encoding/json
// reads its own way) gives its spans' events.
func FuzzZipkinJSON(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 5))
	m := zipkinv2.NewJSONTracesMarshaler()
	for range 8 {
		if b, err := m.MarshalTraces(measurable(randomTraces(r))); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`[` + zipkinSpan + `]`))
	f.Add([]byte(`[{"name":"x","timestamp":1,"duration":1,"localEndpoint":{"serviceName":"a"},"tags":{"error":"","span.kind":"internal"}}]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		d, _ := NewZipkinJSON(SpanConfig{Dimensions: zipkinDims})
		got := checkSpans(t, d, body)
		// Not compared either: both status code tags, of which the receiver keeps either (a map's order).
		if len(got) == 1 && got[0].r == ReasonBadRecord || bytes.Contains(body, []byte(`\`)) || !utf8.Valid(body) ||
			bytes.Contains(body, []byte(`""`)) || bytes.Contains(body, []byte(`"http.status_code"`)) && bytes.Contains(body, []byte(`"http.response.status_code"`)) {
			return
		}
		want, ok := zipkinWant(body, zipkinDims)
		if !ok {
			return
		}
		sameEvents(t, "fuzzed Zipkin JSON as the Collector reads it", sortEvents(got), sortEvents(want))
	})
}

// TestZipkinAllocs: a known span allocates nothing, as the OTLP readers' do, in JSON and in
// proto3.
func TestZipkinAllocs(t *testing.T) {
	jd, err := NewZipkinJSON(SpanConfig{Dimensions: []string{"http.route"}})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := NewZipkinProto(SpanConfig{Dimensions: []string{"http.route"}})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := zipkinv2.NewProtobufTracesMarshaler().MarshalTraces(measurable(testRequest(1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d    *SpanDecoder
		body []byte
	}{{jd, []byte(`[` + zipkinSpan + `,` + zipkinSpan + `]`)}, {pd, pb}} {
		decodeSpans(t, c.d, c.body)
		n := 0
		allocs := testing.AllocsPerRun(100, func() {
			c.d.DecodeLines(c.body, 0, func(_ []byte, _ window.Event, r Reason) {
				if r == ReasonNone {
					n++
				}
			})
		})
		if allocs != 0 || n == 0 {
			t.Fatalf("%v allocations a body of known spans (%d accepted)", allocs, n)
		}
	}
}

// TestZipkinUnitHint: a Zipkin span whose timestamp was written in milliseconds (Zipkin reads
// microseconds) is refused as late with a hint naming both units.
func TestZipkinUnitHint(t *testing.T) {
	st, _ := window.NewStore(window.StoreConfig{})
	in, err := NewIntake(st, Config{}, WithFormat(func() (Format, error) { return NewZipkinJSON(SpanConfig{}) }))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `[{"name":"x","timestamp":%d,"duration":5,"localEndpoint":{"serviceName":"a"}}]`, defTS)
	res := in.Take(body, defTS+1000)
	if got := res.First[ReasonLate]; res.Refused[ReasonLate] != 1 || !strings.HasSuffix(got, ": 1000× too small, a ts in milliseconds where microseconds are read?") {
		t.Errorf("a Zipkin timestamp in ms: %+v %q", res, got)
	}
}

// AppendZipkin writes what the Collector's zipkin receiver reads as the spans given, and what
// the Zipkin reader reads as the receiver's spans say.
func TestAppendZipkin(t *testing.T) {
	code := int64(503)
	spans := []Span{
		{Name: "GET /pay", Kind: 2, Status: 2, Start: defTS * 1e6, End: defTS*1e6 + 1_500_000,
			Attrs: []SpanAttr{{Key: "http.route", Str: "/pay"}, {Key: "http.status_code", Int: &code}}},
		{Name: "db \"q\"", Kind: 3, Start: defTS * 1e6, End: defTS*1e6 + 7},
		{Name: "render", Kind: 1, Start: defTS * 1e6, End: defTS*1e6 + 2_000_000},
	}
	body := AppendZipkin([]byte("keep"), "checkout", spans, 0x5af7183fb1d4cf5f)
	if string(body[:4]) != "keep" {
		t.Fatal("AppendZipkin did not append")
	}
	td, err := zipkinv2.NewJSONTracesUnmarshaler(false).UnmarshalTraces(body[4:])
	if err != nil {
		t.Fatalf("the Collector's receiver: %v\n%s", err, body[4:])
	}
	if td.SpanCount() != 3 {
		t.Fatalf("the receiver reads %d spans", td.SpanCount())
	}
	rs := td.ResourceSpans().At(0)
	if svc, _ := rs.Resource().Attributes().Get("service.name"); svc.Str() != "checkout" {
		t.Fatalf("service %q", svc.Str())
	}
	var sp ptrace.Span
	for _, s := range rs.ScopeSpans().At(0).Spans().All() {
		if s.Name() == "get /pay" {
			sp = s
		}
	}
	route, _ := sp.Attributes().Get("http.route")
	if sp.Name() != "get /pay" || sp.Kind() != ptrace.SpanKindServer || sp.Status().Code() != ptrace.StatusCodeError ||
		int64(sp.EndTimestamp()-sp.StartTimestamp()) != 1_500_000 || route.Str() != "/pay" {
		t.Fatalf("the receiver reads span %q kind %v status %v attrs %v", sp.Name(), sp.Kind(), sp.Status().Code(), sp.Attributes().AsRaw())
	}
	dims := []string{"http.route", "http.response.status_code"} // the receiver's name of http.status_code
	d, _ := NewZipkinJSON(SpanConfig{Dimensions: dims})
	want, ok := zipkinWant(body[4:], dims)
	if !ok {
		t.Fatal("the receiver's spans are not measurable")
	}
	sameEvents(t, "AppendZipkin's record", sortEvents(decodeSpans(t, d, body[4:])), sortEvents(want))
}

// FuzzZipkinProto: no input panics the proto3 reader or breaks checkSpans, and a body the
// Collector's zipkin receiver reads gives its spans' events.
func FuzzZipkinProto(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 6))
	m := zipkinv2.NewProtobufTracesMarshaler()
	for range 8 {
		if b, err := m.MarshalTraces(measurable(randomTraces(r))); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		d, _ := NewZipkinProto(SpanConfig{Dimensions: zipkinDims})
		got := checkSpans(t, d, body)
		if len(got) == 1 && got[0].r == ReasonBadRecord || !utf8.Valid(body) ||
			bytes.Contains(body, []byte("http.status_code")) && bytes.Contains(body, []byte("http.response.status_code")) {
			return
		}
		want, ok := zipkinWantOf(zipkinv2.NewProtobufTracesUnmarshaler(false, false), body, zipkinDims)
		if !ok {
			return
		}
		sameEvents(t, "fuzzed Zipkin proto3 as the Collector reads it", sortEvents(got), sortEvents(want))
	})
}

// TestZipkinProtoRefusals: a JSON record on a zipkin_proto topic says which format reads it;
// a span without duration is refused as in JSON.
func TestZipkinProtoRefusals(t *testing.T) {
	d, err := NewZipkinProto(SpanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("[" + zipkinSpan + "]")
	got := checkSpans(t, d, body)
	if why := d.Explain(body); len(got) != 1 || got[0].r != ReasonBadRecord || !strings.Contains(why, "--event-format zipkin_json") {
		t.Errorf("Zipkin JSON read as zipkin_proto: %+v %q", got, why)
	}
	// ListOfSpans{spans: [Span{name: "x", timestamp: 1764489600123000, local_endpoint: {service_name: "a"}}]}
	sp := []byte{0x2a, 1, 'x', 0x31}
	sp = binary.LittleEndian.AppendUint64(sp, 1764489600123000)
	sp = append(sp, 0x42, 3, 0x0a, 1, 'a')
	body = append([]byte{0x0a, byte(len(sp))}, sp...)
	got = checkSpans(t, d, body)
	if len(got) != 1 || got[0].r != ReasonMissingField {
		t.Fatalf("a proto3 span without duration: %+v", got)
	}
}
