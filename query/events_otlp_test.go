package query_test

import (
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	slideevent "github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// POST /v1/events picks the intake by the body's Content-Type: application/x-protobuf is
// OTLP/protobuf, application/json (and a type nobody named) the default's, slide's JSON.
func TestEventsByContentType(t *testing.T) {
	var st *window.Store
	e := newEnv(t, func(c *query.Config) {
		st = c.Store
		otlp, err := slideevent.NewIntake(st, slideevent.Config{}, slideevent.WithFormat(func() (slideevent.Format, error) {
			return slideevent.NewOTLPProto(slideevent.SpanConfig{Dimensions: []string{"http.route"}})
		}))
		if err != nil {
			t.Fatal(err)
		}
		c.EventsByType = map[string]*slideevent.Intake{"application/x-protobuf": otlp}
	})
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	for i, route := range []string{"/pay", "/pay", "/cart"} {
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("GET")
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetStartTimestamp(pcommon.Timestamp((t0 - 1000) * 1e6))
		sp.SetEndTimestamp(pcommon.Timestamp((t0-1000)*1e6 + int64(i+1)*1e6))
		sp.Attributes().PutStr("http.route", route)
	}
	bad := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty() // no service.name
	bad.SetEndTimestamp(pcommon.Timestamp(t0 * 1e6))
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	code, b, _ := e.do("POST", "/v1/events", body, "Content-Type", "application/x-protobuf; charset=binary")
	var a eventsAnswer
	if err := json.Unmarshal(b, &a); code != 200 || err != nil {
		t.Fatalf("POST protobuf = %d %s", code, b)
	}
	if a.Accepted != 3 || a.Rejected["missing_field"] != 1 || a.First["missing_field"] != `span 4: resource attribute "service.name": absent` {
		t.Fatalf("POST protobuf = %s", b)
	}
	agg, err := st.ReadAt(t0, slideevent.SpanMetric, "checkout\xffhttp_route=/pay\xffspan_kind=SPAN_KIND_SERVER\xffspan_name=GET\xffstatus_code=STATUS_CODE_UNSET", time.Minute, nil)
	if err != nil || agg.Count != 2 || agg.Sum != 3 {
		t.Fatalf("the /pay spans' series: %+v %v, want count 2, sum 3 ms", agg, err)
	}
	// The same bytes as JSON are slide's JSON: refused, not read as spans.
	code, b, _ = e.do("POST", "/v1/events", body, "Content-Type", "application/json")
	if err := json.Unmarshal(b, &a); code != 200 || err != nil || a.Accepted != 0 || a.Rejected["invalid_json"] == 0 {
		t.Fatalf("POST protobuf as application/json = %d %s", code, b)
	}
	if a := e.post([]byte(`{"key":"a","metric":"m","value":1}`)); a.Accepted != 1 {
		t.Fatalf("POST slide JSON without a type: %+v", a)
	}
}
