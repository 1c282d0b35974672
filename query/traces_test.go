package query_test

import (
	"bytes"
	"compress/gzip"
	"log"
	"strings"
	"testing"
	"time"

	zipkinmodel "github.com/openzipkin/zipkin-go/model"
	zipkin_proto3 "github.com/openzipkin/zipkin-go/proto/zipkin_proto3"
	zipkinhttp "github.com/openzipkin/zipkin-go/reporter/http"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	slideevent "github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// TestTracesOTLPHTTP: POST /v1/traces answers as an OTLP/HTTP receiver does, in the request's
// encoding, so a Collector's otlphttp exporter can send to slide: the request protobuf
// (gzip, as the exporter compresses by default) or OTLP/JSON, the answer an
// ExportTraceServiceResponse that pdata's own decoder reads, with partial_success counting
// the refused spans; a body that is no request is a 400 google.rpc.Status; another
// Content-Type a 415.
func TestTracesOTLPHTTP(t *testing.T) {
	var st *window.Store
	e := newEnv(t, func(c *query.Config) {
		st = c.Store
		c.Traces = map[string]*slideevent.Intake{}
		for ct, mk := range map[string]func(slideevent.SpanConfig) (*slideevent.SpanDecoder, error){
			"application/x-protobuf": slideevent.NewOTLPProto, "application/json": slideevent.NewOTLPJSON,
		} {
			in, err := slideevent.NewIntake(st, slideevent.Config{}, slideevent.WithFormat(func() (slideevent.Format, error) {
				return mk(slideevent.SpanConfig{Dimensions: []string{"http.route"}})
			}))
			if err != nil {
				t.Fatal(err)
			}
			c.Traces[ct] = in
		}
	})
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	for i := range 3 {
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("GET")
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetStartTimestamp(pcommon.Timestamp((t0 - 1000) * 1e6))
		sp.SetEndTimestamp(pcommon.Timestamp((t0-1000)*1e6 + int64(i+1)*1e6))
		sp.Attributes().PutStr("http.route", "/pay")
	}
	bad := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty() // no service.name
	bad.SetEndTimestamp(pcommon.Timestamp(t0 * 1e6))
	req := ptraceotlp.NewExportRequestFromTraces(td)

	proto, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(proto)
	zw.Close()
	code, b, hdr := e.do("POST", "/v1/traces", gz.Bytes(), "Content-Type", "application/x-protobuf", "Content-Encoding", "gzip")
	resp := ptraceotlp.NewExportResponse()
	if err := resp.UnmarshalProto(b); code != 200 || err != nil || hdr.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("protobuf: %d %q %v %q", code, hdr.Get("Content-Type"), err, b)
	}
	if ps := resp.PartialSuccess(); ps.RejectedSpans() != 1 || ps.ErrorMessage() != `missing_field: span 4: resource attribute "service.name": absent` {
		t.Fatalf("protobuf partial success: %d %q", ps.RejectedSpans(), ps.ErrorMessage())
	}
	series := "checkout\xffhttp_route=/pay\xffspan_kind=SPAN_KIND_SERVER\xffspan_name=GET\xffstatus_code=STATUS_CODE_UNSET"
	if agg, err := st.ReadAt(t0, slideevent.SpanMetric, series, time.Minute, nil); err != nil || agg.Count != 3 || agg.Sum != 6 {
		t.Fatalf("the spans' series: %+v %v, want count 3, sum 6 ms", agg, err)
	}

	js, err := req.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	code, b, _ = e.do("POST", "/v1/traces", js, "Content-Type", "application/json")
	resp = ptraceotlp.NewExportResponse()
	if err := resp.UnmarshalJSON(b); code != 200 || err != nil || resp.PartialSuccess().RejectedSpans() != 1 {
		t.Fatalf("JSON: %d %v %s", code, err, b)
	}
	if agg, _ := st.ReadAt(t0, slideevent.SpanMetric, series, time.Minute, nil); agg.Count != 6 {
		t.Fatalf("after the JSON request the series holds %d spans, want 6", agg.Count)
	}

	// Nothing refused: an empty response, which the exporter reads as success.
	good := ptrace.NewTraces()
	good.ResourceSpans().AppendEmpty().Resource().Attributes().PutStr("service.name", "cart")
	sp := good.ResourceSpans().At(0).ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetStartTimestamp(pcommon.Timestamp((t0 - 10) * 1e6))
	sp.SetEndTimestamp(pcommon.Timestamp(t0 * 1e6))
	proto, _ = ptraceotlp.NewExportRequestFromTraces(good).MarshalProto()
	if code, b, _ := e.do("POST", "/v1/traces", proto, "Content-Type", "application/x-protobuf"); code != 200 || len(b) != 0 {
		t.Fatalf("all accepted: %d %q, want 200 and an empty ExportTraceServiceResponse", code, b)
	}

	// Not a request: 400 with a google.rpc.Status (3, INVALID_ARGUMENT), nothing recorded.
	if code, b, _ := e.do("POST", "/v1/traces", []byte{0x0a, 0xff}, "Content-Type", "application/x-protobuf"); code != 400 || len(b) < 3 || b[0] != 0x08 || b[1] != 3 {
		t.Fatalf("malformed protobuf: %d %q, want 400 and a Status of code 3", code, b)
	}
	if code, b, _ := e.do("POST", "/v1/traces", []byte("{nope"), "Content-Type", "application/json"); code != 400 || !bytes.Contains(b, []byte(`"code":3`)) {
		t.Fatalf("malformed JSON: %d %s", code, b)
	}
	// Every failure's body is a google.rpc.Status, as OTLP/HTTP requires of 4xx and 5xx (it
	// was slide's {"error":…} for a wrong type, encoding or size), protobuf unless the
	// request was JSON.
	if code, b, _ := e.do("POST", "/v1/traces", proto, "Content-Type", "text/plain"); code != 415 {
		t.Fatalf("text/plain: %d %s", code, b)
	} else if c, msg := otlpStatus(t, b, false); c != 3 || !strings.Contains(msg, `Content-Type "text/plain"`) {
		t.Fatalf("text/plain: Status %d %q", c, msg)
	}
	if code, b, _ := e.do("POST", "/v1/traces", []byte("{}"), "Content-Type", "application/json", "Content-Encoding", "br"); code != 415 {
		t.Fatalf("Content-Encoding br: %d, want 415", code)
	} else if c, msg := otlpStatus(t, b, true); c != 3 || !strings.Contains(msg, "Content-Encoding") {
		t.Fatalf("Content-Encoding br: Status %d %q", c, msg)
	}
}

// otlpStatus reads b, an OTLP/HTTP failure's body, as a google.rpc.Status (genproto's own
// type, protobuf or protojson), and returns its code and message.
func otlpStatus(t *testing.T, b []byte, json bool) (int32, string) {
	t.Helper()
	var st spb.Status
	unmarshal := proto.Unmarshal
	if json {
		unmarshal = protojson.Unmarshal
	}
	if err := unmarshal(b, &st); err != nil {
		t.Fatalf("not a google.rpc.Status: %v: %q", err, b)
	}
	return st.GetCode(), st.GetMessage()
}

// TestTracesGzipBomb: a gzip body is inflated within MaxBodyBytes, so a small compressed
// body that inflates past it is a 413, as a large body is, and records nothing.
func TestTracesGzipBomb(t *testing.T) {
	e := newEnv(t, func(c *query.Config) {
		in, err := slideevent.NewIntake(c.Store, slideevent.Config{}, slideevent.WithFormat(func() (slideevent.Format, error) {
			return slideevent.NewOTLPProto(slideevent.SpanConfig{})
		}))
		if err != nil {
			t.Fatal(err)
		}
		c.Traces = map[string]*slideevent.Intake{"application/x-protobuf": in}
		c.MaxBodyBytes = 1 << 20
	})
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(make([]byte, 8<<20))
	zw.Close()
	if gz.Len() > 64<<10 {
		t.Fatalf("the bomb is %d bytes compressed; the test wants a small one", gz.Len())
	}
	if code, b, _ := e.do("POST", "/v1/traces", gz.Bytes(), "Content-Type", "application/x-protobuf", "Content-Encoding", "gzip"); code != 413 {
		t.Fatalf("8 MiB of zeros in %d gzip bytes: %d %s, want 413", gz.Len(), code, b)
	} else if c, msg := otlpStatus(t, b, false); c != 3 || !strings.Contains(msg, "body larger than") {
		t.Fatalf("the bomb's 413: Status %d %q", c, msg)
	}
}

// TestZipkinSpansAPI: POST /api/v2/spans is Zipkin's span API, so a Zipkin reporter's HTTP
// sender pointed at slide records its spans: zipkin-go's own reporter sends three (the
// Collector's zipkin receiver would make the same events), in JSON and in proto3, answered
// 202 as Zipkin's server answers; a span without duration is refused by reason with the body still accepted; a body
// that is not a span list is a 400 and records nothing; another Content-Type than JSON or
// proto3 a 415.
func TestZipkinSpansAPI(t *testing.T) {
	var st *window.Store
	e := newEnv(t, func(c *query.Config) {
		st = c.Store
		c.Zipkin = map[string]*slideevent.Intake{}
		for ct, mk := range map[string]func(slideevent.SpanConfig) (*slideevent.SpanDecoder, error){
			"application/json": slideevent.NewZipkinJSON, "application/x-protobuf": slideevent.NewZipkinProto,
		} {
			in, err := slideevent.NewIntake(st, slideevent.Config{}, slideevent.WithFormat(func() (slideevent.Format, error) {
				return mk(slideevent.SpanConfig{Dimensions: []string{"http.route"}})
			}))
			if err != nil {
				t.Fatal(err)
			}
			c.Zipkin[ct] = in
		}
	})
	// zipkin-go's reporter, in JSON (its default, which lower-cases names) and in proto3.
	for _, c := range []struct {
		name string
		opts []zipkinhttp.ReporterOption
	}{{"get /pay", nil}, {"GET /pay", []zipkinhttp.ReporterOption{zipkinhttp.Serializer(zipkin_proto3.SpanSerializer{})}}} {
		var logged bytes.Buffer
		rep := zipkinhttp.NewReporter(e.http.URL+"/api/v2/spans", append(c.opts, zipkinhttp.Logger(log.New(&logged, "", 0)))...)
		for i := range 3 {
			rep.Send(zipkinmodel.SpanModel{
				SpanContext:   zipkinmodel.SpanContext{TraceID: zipkinmodel.TraceID{Low: 1}, ID: zipkinmodel.ID(i + 1)},
				Name:          "GET /pay",
				Kind:          zipkinmodel.Server,
				Timestamp:     time.UnixMilli(t0 - 1000),
				Duration:      time.Duration(i+1) * time.Millisecond,
				LocalEndpoint: &zipkinmodel.Endpoint{ServiceName: "checkout"},
				Tags:          map[string]string{"http.route": "/pay"},
			})
		}
		if err := rep.Close(); err != nil || logged.Len() > 0 {
			t.Fatalf("zipkin-go's reporter of %q: %v, logged %q", c.name, err, logged.String())
		}
		series := "checkout\xffhttp_route=/pay\xffspan_kind=SPAN_KIND_SERVER\xffspan_name=" + c.name + "\xffstatus_code=STATUS_CODE_UNSET"
		if agg, err := st.ReadAt(t0, slideevent.SpanMetric, series, time.Minute, nil); err != nil || agg.Count != 3 || agg.Sum != 6 {
			t.Fatalf("the reporter's spans %q: %+v %v, want count 3, sum 6 ms", c.name, agg, err)
		}
	}

	noDur := []byte(`[{"traceId":"1","id":"5","name":"x","timestamp":1764489599000000,"localEndpoint":{"serviceName":"checkout"}},` +
		`{"traceId":"1","id":"6","name":"x","timestamp":1764489599000000,"duration":500,"localEndpoint":{"serviceName":"checkout"}}]`)
	code, b, _ := e.do("POST", "/api/v2/spans", noDur, "Content-Type", "application/json")
	if want := `{"accepted":1,"rejected":{"missing_field":1},"first":{"missing_field":"span 1: no \"duration\": an unfinished span, or the half of a shared span that its other half measures"}}` + "\n"; code != 202 || string(b) != want {
		t.Fatalf("a span without duration: %d %s\nwant 202 %s", code, b, want)
	}
	before := st.Len()
	if code, b, _ := e.do("POST", "/api/v2/spans", []byte(`{"resourceSpans":[]}`), "Content-Type", "application/json"); code != 400 ||
		!bytes.Contains(b, []byte("--event-format otlp_json")) || st.Len() != before {
		t.Fatalf("an OTLP/JSON body: %d %s (series %d, were %d)", code, b, st.Len(), before)
	}
	if code, b, hdr := e.do("POST", "/api/v2/spans", []byte("x"), "Content-Type", "text/plain"); code != 415 || hdr.Get("Accept-Post") != "application/x-protobuf, application/json" {
		t.Fatalf("a text body: %d %s", code, b)
	}
}

// TestLogsOTLPHTTP: POST /v1/logs answers as an OTLP/HTTP logs receiver does, so a Collector's
// otlphttp exporter can send its access logs to slide: each log record's body a line of the
// event map, the answer an ExportLogsServiceResponse that pdata reads, partial_success counting
// the refused log records (a record whose line gives two refused events, latency and bytes,
// counts once), in protobuf and in OTLP/JSON; without an event map, 501.
func TestLogsOTLPHTTP(t *testing.T) {
	var st *window.Store
	e := newEnv(t, func(c *query.Config) {
		st = c.Store
		m, _ := slideevent.Preset("envoy")
		c.Logs = map[string]*slideevent.Intake{}
		for ct, mk := range map[string]func(slideevent.Map, slideevent.Config) (*slideevent.LogsDecoder, error){
			"application/x-protobuf": slideevent.NewOTLPLogs, "application/json": slideevent.NewOTLPLogsJSON,
		} {
			in, err := slideevent.NewIntake(st, slideevent.Config{}, slideevent.WithFormat(func() (slideevent.Format, error) { return mk(m, slideevent.Config{}) }))
			if err != nil {
				t.Fatal(err)
			}
			c.Logs[ct] = in
		}
	})
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, line := range []string{`{"duration":3,"bytes_sent":10,"upstream_cluster":"c","response_code":200}`, `{"bytes_sent":1}`, `{"response_code":503}`} {
		lr := lrs.AppendEmpty()
		lr.Body().SetStr(line)
		lr.SetTimestamp(pcommon.Timestamp((t0 - 1000) * 1e6))
	}
	req := plogotlp.NewExportRequestFromLogs(ld)
	proto, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	code, b, hdr := e.do("POST", "/v1/logs", proto, "Content-Type", "application/x-protobuf")
	resp := plogotlp.NewExportResponse()
	if err := resp.UnmarshalProto(b); code != 200 || err != nil || hdr.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("protobuf: %d %q %v %q", code, hdr.Get("Content-Type"), err, b)
	}
	if ps := resp.PartialSuccess(); ps.RejectedLogRecords() != 2 || ps.ErrorMessage() != `missing_field: log record 2: no field "duration"` {
		t.Fatalf("protobuf partial success: %d %q", ps.RejectedLogRecords(), ps.ErrorMessage())
	}
	if agg, err := st.ReadMerged(t0, "latency_ms", func(string) bool { return true }, time.Minute, nil); err != nil || agg.Count != 1 || agg.Sum != 3 {
		t.Fatalf("the access line's latency: %+v %v, want count 1, sum 3", agg, err)
	}
	js, err := req.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if code, b, _ := e.do("POST", "/v1/logs", js, "Content-Type", "application/json"); code != 200 || !bytes.Contains(b, []byte(`"rejectedLogRecords":"2"`)) {
		t.Fatalf("OTLP/JSON: %d %s", code, b)
	}
	// Without an event map, 501 naming the flag that configures the route (it said only
	// "no intake is configured on this server for /v1/logs").
	if code, b, _ := newEnv(t, nil).do("POST", "/v1/logs", proto, "Content-Type", "application/x-protobuf"); code != 501 {
		t.Fatalf("without an event map: %d %s; want 501", code, b)
	} else if c, msg := otlpStatus(t, b, false); c != 12 || !strings.Contains(msg, "--event-map") {
		t.Fatalf("without an event map: Status %d %q; want UNIMPLEMENTED naming --event-map", c, msg)
	}
}
