package ingest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/translator/zipkin/zipkinv2"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/window"
)

// TestConsumerOTLPSpans: records the Collector's kafka exporter writes (pdata's ProtoMarshaler,
// otlp_proto; contrib's zipkinv2 marshaler, zipkin_json) go through the embedded broker into a
// consumer of that --event-format: every series' count is exact and its p95 within the
// sketch's 1% of the truth's, the spans per status_code and the http_route groups of a service
// are exactly those sent, and a span that cannot be measured (without service.name; Zipkin's
// without duration) and a record that is not a request are refused by their reasons.
func TestConsumerOTLPSpans(t *testing.T) {
	for _, format := range []string{"otlp_proto", "zipkin_json", "zipkin_proto"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			consumeSpans(t, format)
		})
	}
}

func consumeSpans(t *testing.T, format string) {
	zipkin := strings.HasPrefix(format, "zipkin")
	c := kafkatest.Start(t, "spans", 2)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(27, 2))
	services := []string{"checkout", "payments", "frontend"}
	routes := []string{"/pay", "/cart", "/users/{id}"}
	truth := map[string][]float64{}          // series string → durations
	perStatus := map[string]uint64{}         // status_code → spans
	routesOf := map[string]map[string]bool{} // service → routes sent
	spansOf := map[string][]sentSpan{}       // series string → its spans, for the exemplars
	var msgs []kafka.Message
	for r := range 40 {
		td := ptrace.NewTraces()
		svc := services[r%len(services)]
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		ss := rs.ScopeSpans().AppendEmpty()
		for range 20 + rng.IntN(40) {
			sp := ss.Spans().AppendEmpty()
			route := routes[rng.IntN(len(routes))]
			status := ptrace.StatusCode(rng.IntN(10) / 8 * 2) // one in five an error
			end := t0.Add(-time.Duration(rng.Int64N(int64(2 * time.Minute)))).UnixNano()
			dur := int64(math.Exp(rng.NormFloat64()+3) * 1e6)
			sp.SetName("GET " + route)
			n := len(spansOf) + 1000*r + rng.IntN(1000) // ids of its own, high bytes set: 128-bit in Zipkin too
			trace, spanID := pcommon.TraceID{0: byte(r), 1: byte(n), 2: byte(n >> 8), 15: 1}, pcommon.SpanID{0: byte(n), 1: byte(n >> 8), 7: 1}
			sp.SetTraceID(trace)
			sp.SetSpanID(spanID)
			sp.SetKind(ptrace.SpanKindServer)
			sp.Status().SetCode(status)
			sp.SetStartTimestamp(pcommon.Timestamp(end - dur))
			sp.SetEndTimestamp(pcommon.Timestamp(end))
			sp.Attributes().PutStr("http.route", route)
			sp.Attributes().PutInt("http.response.status_code", 200)
			code := "STATUS_CODE_" + map[ptrace.StatusCode]string{ptrace.StatusCodeUnset: "UNSET", ptrace.StatusCodeError: "ERROR"}[status]
			name, ms := "GET "+route, float64(dur)/1e6
			switch format { // Zipkin's times are µs; its JSON reporters write names lower-cased
			case "zipkin_json":
				name, ms = "get "+route, float64((dur+500)/1000)/1e3
			case "zipkin_proto":
				ms = float64(dur/1000) / 1e3
			}
			series, err := window.AppendSeries(nil, svc, []window.Label{{Name: "http_route", Value: route},
				{Name: "span_kind", Value: "SPAN_KIND_SERVER"}, {Name: "span_name", Value: name}, {Name: "status_code", Value: code}})
			if err != nil {
				t.Fatal(err)
			}
			truth[string(series)] = append(truth[string(series)], ms)
			spansOf[string(series)] = append(spansOf[string(series)], sentSpan{ms, trace, spanID})
			perStatus[code]++
			if routesOf[svc] == nil {
				routesOf[svc] = map[string]bool{}
			}
			routesOf[svc][route] = true
		}
		if r == 7 && !zipkin { // a resource without service.name: its span is refused
			orphan := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			orphan.SetEndTimestamp(pcommon.Timestamp(t0.UnixNano()))
		}
		var body []byte
		var err error
		switch format {
		case "zipkin_json":
			body, err = zipkinv2.NewJSONTracesMarshaler().MarshalTraces(td)
		case "zipkin_proto":
			body, err = zipkinv2.NewProtobufTracesMarshaler().MarshalTraces(td)
		default:
			body, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(svc), Value: body})
	}
	switch format { // a span without its duration: refused
	case "zipkin_json":
		msgs = append(msgs, kafka.Message{Key: []byte("x"), Value: fmt.Appendf(nil,
			`[{"traceId":"1","id":"2","name":"x","timestamp":%d,"localEndpoint":{"serviceName":"checkout"}}]`, t0.UnixMicro())})
	case "zipkin_proto": // ListOfSpans{spans: [{name: "x", timestamp, local_endpoint: {service_name: "checkout"}}]}
		sp := binary.LittleEndian.AppendUint64([]byte{0x2a, 1, 'x', 0x31}, uint64(t0.UnixMicro()))
		sp = append(sp, 0x42, 10, 0x0a, 8, 'c', 'h', 'e', 'c', 'k', 'o', 'u', 't')
		msgs = append(msgs, kafka.Message{Key: []byte("x"), Value: append([]byte{0x0a, byte(len(sp))}, sp...)})
	}
	msgs = append(msgs, kafka.Message{Key: []byte("x"), Value: []byte{0x0a, 0x7f, 0x01}}) // a length past the record
	c.Produce(t, msgs...)

	cfg := testConfig(c, "otlp")
	cfg.Format = func() (event.Format, error) {
		switch format {
		case "zipkin_json":
			return event.NewZipkinJSON(event.SpanConfig{Dimensions: []string{"http.route"}})
		case "zipkin_proto":
			return event.NewZipkinProto(event.SpanConfig{Dimensions: []string{"http.route"}})
		}
		return event.NewOTLPProto(event.SpanConfig{Dimensions: []string{"http.route"}})
	}
	store, err := window.NewStore(window.StoreConfig{Exemplars: true})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg, store, t0)
	eventually(t, 10*time.Second, "the spans", func() bool { return caughtUp(t, c, r) }, progress(r))
	checkSpanExemplars(t, store, t0.UnixMilli(), spansOf)

	now := t0.UnixMilli()
	var spans int
	for series, durs := range truth {
		a, err := store.ReadAt(now, event.SpanMetric, series, 5*time.Minute, []float64{0.95})
		if err != nil {
			t.Fatalf("%q: %v", series, err)
		}
		slices.Sort(durs)
		spans += len(durs)
		want := durs[int(0.95*float64(len(durs)-1))] // the rank the store's quantiles read
		if a.Count != uint64(len(durs)) || math.Abs(a.Quantiles[0]-want) > 0.01*want {
			t.Errorf("%q: count %d p95 %v, want %d and %v within 1%%", series, a.Count, a.Quantiles[0], len(durs), want)
		}
	}
	if store.Len() != len(truth) {
		t.Errorf("store holds %d series, the spans make %d", store.Len(), len(truth))
	}
	if got := sum(r.m.events); got != float64(spans) {
		t.Errorf("slide_ingest_events_total = %v, want the %d spans", got, spans)
	}
	if got := sum(r.m.rejectedBy[event.ReasonMissingField]) + sum(r.m.rejectedBy[event.ReasonBadRecord]); got != 2 || sum(r.m.rejected) != 2 {
		t.Errorf("refusals: missing_field and bad_record %v, all %v; want one each", got, sum(r.m.rejected))
	}
	all, err := window.CompileSelector("*", nil)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := store.ReadGroups(now, event.SpanMetric, all, []string{"status_code"}, 5*time.Minute, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, g := range groups {
		got[g.Labels[0].Value] = g.Agg.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(perStatus) {
		t.Errorf("spans by status_code %v, sent %v", got, perStatus)
	}
	for svc, sent := range routesOf {
		sel, err := window.CompileSelector(svc, nil)
		if err != nil {
			t.Fatal(err)
		}
		groups, err := store.ReadGroups(now, event.SpanMetric, sel, []string{"http_route"}, 5*time.Minute, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, g := range groups {
			if !sent[g.Labels[0].Value] {
				t.Errorf("%s: a group of route %q, not sent", svc, g.Labels[0].Value)
			}
			n += g.Agg.Count
		}
		var want uint64
		for series, durs := range truth {
			if window.SeriesKeyOf(series) == svc {
				want += uint64(len(durs))
			}
		}
		if len(groups) != len(sent) || n != want {
			t.Errorf("%s: %d route groups of %d spans, sent %d routes, %d spans", svc, len(groups), n, len(sent), want)
		}
	}
}

// sentSpan is a span a test sent: its duration in ms as slide reads it, and its ids.
type sentSpan struct {
	ms    float64
	trace [16]byte
	span  [8]byte
}

// checkSpanExemplars: every series of spans has exemplars (--exemplars), each the trace and
// span ids of one of its spans, with that span's duration, and the series' slowest span is
// among them (it is the slowest of its slot): the decoder carried each span's ids into its
// event, and no span's ids went to another's.
func checkSpanExemplars(t *testing.T, store *window.Store, now int64, spansOf map[string][]sentSpan) {
	t.Helper()
	got := map[string][]window.Exemplar{}
	store.VisitExemplars(now, event.SpanMetric, nil, nil, nil, func(series string, ex []window.Exemplar) bool {
		got[series] = slices.Clone(ex)
		return true
	})
	if len(got) != len(spansOf) {
		t.Errorf("%d series with exemplars, %d sent", len(got), len(spansOf))
	}
	for series, spans := range spansOf {
		ex := got[series]
		slowest := 0.0
		for _, sp := range spans {
			slowest = max(slowest, sp.ms)
		}
		top := 0.0
		for _, e := range ex {
			found := false
			for _, sp := range spans {
				found = found || sp.trace == e.TraceID && sp.span == e.SpanID && sp.ms == e.Value
			}
			if !found {
				t.Errorf("%q: exemplar %x/%x of %v ms is none of its spans", series, e.TraceID, e.SpanID, e.Value)
			}
			top = max(top, e.Value)
		}
		if len(ex) == 0 || top != slowest {
			t.Errorf("%q: exemplars %v, want its slowest span (%v ms) among them", series, ex, slowest)
		}
	}
}

// TestSnapshotKeepsExemplars: a consumer of OTLP spans with exemplars writes snapshots; a
// second of the same group restores from them (not from the log) and holds the exemplars a
// full replay of the log holds: the slots' slowest spans of before the snapshot too.
func TestSnapshotKeepsExemplars(t *testing.T) {
	c := kafkatest.Start(t, "spans", 2)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(27, 3))
	var msgs []kafka.Message
	for r := range 60 {
		svc := []string{"checkout", "payments", "frontend"}[r%3]
		spans := make([]event.Span, 20)
		for i := range spans {
			end := t0.Add(-time.Duration(rng.Int64N(int64(4 * time.Minute)))).UnixNano()
			spans[i] = event.Span{Name: "GET /pay", Kind: 2, Start: end - rng.Int64N(int64(time.Second)), End: end}
			binary.LittleEndian.PutUint64(spans[i].TraceID[:], rng.Uint64()|1)
			binary.LittleEndian.PutUint64(spans[i].SpanID[:], rng.Uint64()|1)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(svc), Value: event.AppendOTLP(nil, svc, spans)})
	}
	c.Produce(t, msgs...)
	newStore := func() *window.Store {
		s, err := window.NewStore(window.StoreConfig{Exemplars: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cfg := testConfig(c, "snap")
	cfg.Format = func() (event.Format, error) { return event.NewOTLPProto(event.SpanConfig{}) }
	cfg.Snapshots = SnapshotConfig{Interval: 20 * time.Millisecond, ChunkBytes: 256}
	first := start(t, cfg, newStore(), t0)
	eventually(t, 20*time.Second, "first consumer caught up", func() bool { return caughtUp(t, c, first) }, progress(first))
	eventually(t, 20*time.Second, "snapshots of the end", func() bool { return coversEnd(first.Consumer) })
	first.stop(t)
	second := start(t, cfg, newStore(), t0)
	eventually(t, 20*time.Second, "second consumer caught up", func() bool { return caughtUp(t, c, second) }, progress(second))
	if got := sum(second.sm.restores.WithLabelValues(sourceSnapshot, reasonLoaded)); got != 2 {
		t.Fatalf("%v partitions loaded from a snapshot, want 2", got)
	}
	replayCfg := testConfig(c, "reference")
	replayCfg.Format = cfg.Format
	reference := start(t, replayCfg, newStore(), t0)
	eventually(t, 20*time.Second, "reference caught up", func() bool { return caughtUp(t, c, reference) }, progress(reference))
	exemplars := func(s *window.Store) map[string][]window.Exemplar {
		out := map[string][]window.Exemplar{}
		s.VisitExemplars(t0.UnixMilli(), event.SpanMetric, nil, nil, nil, func(series string, ex []window.Exemplar) bool {
			out[series] = slices.Clone(ex)
			return true
		})
		return out
	}
	want, got := exemplars(reference.store), exemplars(second.store)
	if len(want) != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("restored exemplars\n%v\nfull replay's\n%v", got, want)
	}
}
