package event

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/window"
)

// The OTLP formats are held to pdata, the code the Collector's kafka exporter runs: its
// marshalers write the records, and a walk over its unmarshalled spans says what each span's
// event must be.

var testDims = []string{"http.route", "http.response.status_code", "deployment.environment", "sampled", "ratio"}

// randomTraces is a request of 1–3 resources of 1–3 scopes of 0–12 spans each, with what
// producers send: a service.name or none, or one of another type; dimension attributes of
// every scalar type on spans and resources; attributes nobody asked for (arrays, maps,
// bytes, nesting); spans ending before they start; names in any script.
func randomTraces(r *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	names := []string{"GET /pay", "POST /checkout", "db.query", "", "グラフ", "send\tmail"}
	routes := []string{"/pay", "/checkout", "/users/{id}", ""}
	for range 1 + r.IntN(3) {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("host.name", fmt.Sprintf("host-%d", r.IntN(5)))
		switch r.IntN(8) {
		case 0: // none
		case 1:
			ra.PutInt("service.name", int64(r.IntN(3)))
		case 2:
			ra.PutStr("service.name", "")
		default:
			ra.PutStr("service.name", []string{"checkout", "payments", "frontend"}[r.IntN(3)])
		}
		if r.IntN(2) == 0 {
			ra.PutStr("deployment.environment", []string{"prod", "staging"}[r.IntN(2)])
		}
		if r.IntN(3) == 0 {
			ra.PutStr("http.route", "/from-resource")
		}
		for range 1 + r.IntN(3) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("lib")
			ss.Scope().Attributes().PutStr("scope.attr", "x")
			for range r.IntN(13) {
				sp := ss.Spans().AppendEmpty()
				sp.SetName(names[r.IntN(len(names))])
				sp.SetKind(ptrace.SpanKind(r.IntN(6)))
				sp.Status().SetCode(ptrace.StatusCode(r.IntN(3)))
				if r.IntN(4) == 0 {
					sp.Status().SetMessage("boom")
				}
				var tid pcommon.TraceID
				var sid pcommon.SpanID
				tid[0], sid[0] = byte(r.IntN(256)), byte(r.IntN(256))+1
				sp.SetTraceID(tid)
				sp.SetSpanID(sid)
				start := uint64(1764489600000000000) + uint64(r.Int64N(int64(3600e9)))
				end := start + uint64(r.Int64N(int64(5e9)))
				if r.IntN(20) == 0 {
					end = start - uint64(r.Int64N(1e6)) - 1
				}
				sp.SetStartTimestamp(pcommon.Timestamp(start))
				sp.SetEndTimestamp(pcommon.Timestamp(end))
				a := sp.Attributes()
				if r.IntN(3) > 0 {
					a.PutStr("http.route", routes[r.IntN(len(routes))])
				}
				switch r.IntN(4) {
				case 0:
					a.PutInt("http.response.status_code", []int64{200, 404, 500}[r.IntN(3)])
				case 1:
					a.PutStr("http.response.status_code", "503")
				}
				if r.IntN(3) == 0 {
					a.PutBool("sampled", r.IntN(2) == 0)
				}
				if r.IntN(3) == 0 {
					a.PutDouble("ratio", []float64{0.25, 1e-7, 3, 1e21, -0.5}[r.IntN(5)])
				}
				if r.IntN(3) == 0 {
					s := a.PutEmptySlice("tags")
					s.AppendEmpty().SetStr("a")
					s.AppendEmpty().SetEmptyMap().PutInt("n", 1)
				}
				if r.IntN(4) == 0 {
					a.PutEmptyBytes("blob").FromRaw([]byte{1, 2, 3})
				}
				if r.IntN(4) == 0 {
					ev := sp.Events().AppendEmpty()
					ev.SetName("exception")
					ev.Attributes().PutStr("exception.message", "x")
				}
			}
		}
	}
	return td
}

// gotEvent is an event or its refusal, as a decoder or the walk says.
type gotEvent struct {
	ev window.Event
	r  Reason
}

// walkSpans is what each span of td must give, read from pdata's objects.
func walkSpans(td ptrace.Traces, keyAttr string, dims []string) []gotEvent {
	var out []gotEvent
	for _, rs := range td.ResourceSpans().All() {
		ra := rs.Resource().Attributes()
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				out = append(out, walkSpan(ra, sp, keyAttr, dims))
			}
		}
	}
	return out
}

func walkSpan(ra pcommon.Map, sp ptrace.Span, keyAttr string, dims []string) gotEvent {
	kv, ok := ra.Get(keyAttr)
	key := ""
	switch kvType(kv, ok) {
	case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeBool, pcommon.ValueTypeDouble:
		key = kv.AsString()
	}
	switch {
	case !ok || key == "":
		return gotEvent{r: ReasonMissingField}
	case len(key) > DefaultMaxKeyLen:
		return gotEvent{r: ReasonKeyTooLong}
	case !window.ValidName(key):
		return gotEvent{r: ReasonBadField}
	}
	start, end := uint64(sp.StartTimestamp()), uint64(sp.EndTimestamp())
	if end < start {
		return gotEvent{r: ReasonInvalidValue}
	}
	if sp.Kind() < 0 || sp.Kind() > 5 || sp.Status().Code() < 0 || sp.Status().Code() > 2 {
		return gotEvent{r: ReasonBadField}
	}
	ls := []window.Label{
		{Name: "span_name", Value: sp.Name()},
		{Name: "span_kind", Value: "SPAN_KIND_" + strings.ToUpper(sp.Kind().String())},
		{Name: "status_code", Value: "STATUS_CODE_" + strings.ToUpper(sp.Status().Code().String())},
	}
	for _, d := range dims {
		v, ok := sp.Attributes().Get(d)
		if !ok {
			v, ok = ra.Get(d)
		}
		if !ok {
			continue
		}
		switch v.Type() {
		case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeBool, pcommon.ValueTypeDouble:
			ls = append(ls, window.Label{Name: SpanLabelName(d), Value: v.AsString()})
		}
	}
	for _, l := range ls {
		if len(l.Value) > window.MaxLabelValueLen {
			return gotEvent{r: ReasonKeyTooLong}
		}
		if window.CheckLabelValue(l.Value) != nil {
			return gotEvent{r: ReasonBadField}
		}
	}
	window.SortLabels(ls)
	series, err := window.AppendSeries(nil, key, ls)
	if err != nil {
		panic(err)
	}
	ev := window.Event{Metric: "duration_ms", Key: string(series), Value: float64(end-start) / 1e6,
		Count: 1, TS: int64(end / 1e6)}
	if !sp.TraceID().IsEmpty() { // a span's ids, unless its trace id is none (all zero)
		ev.TraceID, ev.SpanID = sp.TraceID(), sp.SpanID()
	}
	return gotEvent{ev: ev}
}

func kvType(v pcommon.Value, ok bool) pcommon.ValueType {
	if !ok {
		return pcommon.ValueTypeEmpty
	}
	return v.Type()
}

func decodeSpans(t testing.TB, f Format, body []byte) []gotEvent {
	var out []gotEvent
	n := f.DecodeLines(body, defTS, func(_ []byte, ev window.Event, r Reason) { out = append(out, gotEvent{ev, r}) })
	if n != len(out) {
		t.Fatalf("DecodeLines returned %d, called fn %d times", n, len(out))
	}
	return out
}

func sameEvents(t *testing.T, what string, got, want []gotEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.r != w.r || g.ev != w.ev && !(math.IsNaN(g.ev.Value) && math.IsNaN(w.ev.Value)) {
			t.Fatalf("%s: span %d = %+v %v (key %q), want %+v %v (key %q)", what, i+1, g.ev, g.r, g.ev.Key, w.ev, w.r, w.ev.Key)
		}
	}
}

// TestOTLPDifferential: for random traces written by pdata's marshalers, both formats give
// each span the event a walk over pdata's unmarshalled spans says, refusals included.
func TestOTLPDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 27))
	cfg := SpanConfig{Dimensions: testDims}
	pf, err := NewOTLPProto(cfg)
	if err != nil {
		t.Fatal(err)
	}
	jf, err := NewOTLPJSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var pm ptrace.ProtoMarshaler
	var jm ptrace.JSONMarshaler
	var pu ptrace.ProtoUnmarshaler
	spans := 0
	for i := range 300 {
		td := randomTraces(r)
		pb, err := pm.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		back, err := pu.UnmarshalTraces(pb)
		if err != nil {
			t.Fatal(err)
		}
		want := walkSpans(back, DefaultSpanKey, testDims)
		spans += len(want)
		sameEvents(t, fmt.Sprintf("request %d, otlp_proto", i), decodeSpans(t, pf, pb), want)
		jb, err := jm.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, fmt.Sprintf("request %d, otlp_json", i), decodeSpans(t, jf, jb), want)
	}
	if spans < 1000 {
		t.Fatalf("only %d spans compared", spans)
	}
}

// The protobuf scan reads what pdata writes (one-byte tags and lengths) by fast paths, and
// anything else field by field: the same requests with every tag and length written in a
// longer varint (as protobuf allows) give the same events, read only by the field-by-field
// path.
func TestOTLPProtoLongForm(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 27))
	f, err := NewOTLPProto(SpanConfig{Dimensions: testDims})
	if err != nil {
		t.Fatal(err)
	}
	var pm ptrace.ProtoMarshaler
	for i := range 100 {
		pb, err := pm.MarshalTraces(randomTraces(r))
		if err != nil {
			t.Fatal(err)
		}
		want := decodeSpans(t, f, pb)
		long := longForm(t, nil, pb, pbRequest)
		if len(long) <= len(pb) && len(pb) > 0 {
			t.Fatalf("request %d: the long form is not longer", i)
		}
		sameEvents(t, fmt.Sprintf("request %d in long form", i), decodeSpans(t, f, long), want)
	}
}

// The messages of an ExportTraceServiceRequest that longForm enters (not a span's events,
// links or status, whose fields it copies as they are), and their message fields.
const (
	pbRequest = iota
	pbResourceSpans
	pbResource
	pbScopeSpans
	pbScope
	pbSpan
	pbKeyValue
	pbAnyValue
	pbArray
	pbKVList
)

var pbMessages = map[[2]int]int{
	{pbRequest, 1}: pbResourceSpans, {pbResourceSpans, 1}: pbResource, {pbResourceSpans, 2}: pbScopeSpans,
	{pbResource, 1}: pbKeyValue, {pbScopeSpans, 1}: pbScope, {pbScopeSpans, 2}: pbSpan, {pbScope, 3}: pbKeyValue,
	{pbSpan, 9}: pbKeyValue, {pbKeyValue, 2}: pbAnyValue, {pbAnyValue, 5}: pbArray, {pbAnyValue, 6}: pbKVList,
	{pbArray, 1}: pbAnyValue, {pbKVList, 1}: pbKeyValue,
}

// longForm appends message b of type msg with each tag and length one byte longer than its
// shortest varint.
func longForm(t *testing.T, out, b []byte, msg int) []byte {
	long := func(out []byte, v uint64) []byte {
		out = binary.AppendUvarint(out, v)
		out[len(out)-1] |= 0x80
		return append(out, 0)
	}
	for i := 0; i < len(b); {
		tag, n := binary.Uvarint(b[i:])
		if n <= 0 {
			t.Fatalf("a tag pdata wrote: %v", b[i:])
		}
		i += n
		out = long(out, tag)
		switch tag & 7 {
		case wtVarint:
			_, n = binary.Uvarint(b[i:])
			out, i = append(out, b[i:i+n]...), i+n
		case wtFixed64:
			out, i = append(out, b[i:i+8]...), i+8
		case wtFixed32:
			out, i = append(out, b[i:i+4]...), i+4
		case wtLen:
			l, n := binary.Uvarint(b[i:])
			v := b[i+n : i+n+int(l)]
			i += n + int(l)
			if sub, ok := pbMessages[[2]int{msg, int(tag >> 3)}]; ok {
				v = longForm(t, nil, v, sub)
			}
			out = append(long(out, uint64(len(v))), v...)
		default:
			t.Fatalf("wire type %d pdata wrote", tag&7)
		}
	}
	return out
}

// testRequest is a pdata request of 80 spans over 4 services, every span with a route and a
// status code attribute, as a service's exporter batches them.
func testRequest(seed uint64) ptrace.Traces {
	r := rand.New(rand.NewPCG(seed, 80))
	td := ptrace.NewTraces()
	for s := range 4 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", []string{"checkout", "payments", "frontend", "cart"}[s])
		rs.Resource().Attributes().PutStr("deployment.environment", "prod")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("io.opentelemetry.http")
		for range 20 {
			sp := ss.Spans().AppendEmpty()
			var tid pcommon.TraceID
			var sid pcommon.SpanID
			for k := range tid {
				tid[k] = byte(r.IntN(256))
			}
			for k := range sid {
				sid[k] = byte(r.IntN(256))
			}
			sp.SetTraceID(tid)
			sp.SetSpanID(sid)
			sp.SetName([]string{"GET /pay", "POST /checkout", "GET /cart"}[r.IntN(3)])
			sp.SetKind(ptrace.SpanKindServer)
			start := uint64(1764489600000000000) + uint64(r.Int64N(60e9))
			sp.SetStartTimestamp(pcommon.Timestamp(start))
			sp.SetEndTimestamp(pcommon.Timestamp(start + uint64(r.Int64N(2e9))))
			code := []int64{200, 200, 200, 404, 500}[r.IntN(5)]
			if code == 500 {
				sp.Status().SetCode(ptrace.StatusCodeError)
			}
			sp.Attributes().PutStr("http.route", []string{"/pay", "/checkout", "/cart"}[r.IntN(3)])
			sp.Attributes().PutInt("http.response.status_code", code)
			sp.Attributes().PutStr("http.request.method", "GET")
			sp.Attributes().PutStr("url.path", "/pay/123")
		}
	}
	return td
}

// Reading a request allocates nothing per span once its keys and series are interned, in
// either format, by the decoder and through the intake.
func TestOTLPAllocs(t *testing.T) {
	td := testRequest(1)
	pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	jb, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	cfg := SpanConfig{Dimensions: []string{"http.route", "http.response.status_code", "deployment.environment"}}
	for _, tc := range []struct {
		name string
		new  func(SpanConfig) (*SpanDecoder, error)
		body []byte
	}{{"otlp_proto", NewOTLPProto, pb}, {"otlp_json", NewOTLPJSON, jb}} {
		f, err := tc.new(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		fn := func(_ []byte, _ window.Event, r Reason) {
			if r != ReasonNone {
				t.Fatalf("%s: refused %v", tc.name, r)
			}
			n++
		}
		f.DecodeLines(tc.body, 0, fn)
		if a := testing.AllocsPerRun(50, func() { f.DecodeLines(tc.body, 0, fn) }); a != 0 {
			t.Errorf("%s: %v allocations per request of 80 spans", tc.name, a)
		}
		if n != 80*52 { // the first call, AllocsPerRun's warm-up and 50
			t.Fatalf("%s: %d spans, want %d", tc.name, n, 80*52)
		}
		st, err := window.NewStore(window.StoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		in, err := NewIntake(st, Config{}, WithFormat(func() (Format, error) { return tc.new(cfg) }))
		if err != nil {
			t.Fatal(err)
		}
		g := in.NewFormat()
		now := int64(1764489660000)
		rec := Record{TS: now, Feed: window.FeedOf(0)}
		refused := func(_ []byte, r Reason) { t.Fatalf("%s: refused %v", tc.name, r) }
		for range 100 { // the series fill until their rings hold sketches, which allocates
			if acc, n := in.TakeRecord(g, tc.body, now, rec, refused); acc != 80 || n != 80 {
				t.Fatalf("%s: TakeRecord = %d accepted of %d", tc.name, acc, n)
			}
		}
		if a := testing.AllocsPerRun(50, func() { in.TakeRecord(g, tc.body, now, rec, refused) }); a != 0 {
			t.Errorf("%s: TakeRecord: %v allocations per request of 80 spans", tc.name, a)
		}
	}
}

// attrSlot finds each dimension by its name, whether its length is its own among the
// dimensions', shared by several, or past the table by length (64 bytes or more).
func TestSpanAttrSlot(t *testing.T) {
	long := strings.Repeat("x", 70)
	dims := []string{"http.route", "code", "kind", long, "http.rout", long + "y"}
	f, err := NewOTLPProto(SpanConfig{Dimensions: dims})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range dims {
		if got := f.attrSlot([]byte(d), false); got != 1+i {
			t.Fatalf("attrSlot(%q) = %d, want %d", d, got, 1+i)
		}
	}
	for _, name := range []string{"", "cod", "http.routx", "kine", long + "z", DefaultSpanKey} {
		if got := f.attrSlot([]byte(name), false); got != -1 {
			t.Fatalf("attrSlot(%q) = %d, want -1", name, got)
		}
	}
	if got := f.attrSlot([]byte(DefaultSpanKey), true); got != 0 {
		t.Fatalf("attrSlot(the key, with it) = %d, want 0", got)
	}
}
