package event

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A span takes its series from the recent cache only when its parts equal those the slot's
// series was written from: spans whose parts hash alike (names alike but in their middle), an
// integer and a string of the same text, a dimension from the span or from its resource, all
// alternating so that each finds the other's series in its slot, give what pdata's walk says,
// read once and again (the second time from the cache).
func TestOTLPRecentSeries(t *testing.T) {
	a, b := "aaaaaaaa-X-bbbbbbbb", "aaaaaaaa-Y-bbbbbbbb"
	va, vb := attrVal{kind: valString, b: []byte(a)}, attrVal{kind: valString, b: []byte(b)}
	if partHash(0, &va) != partHash(0, &vb) {
		t.Fatal("the names meant to collide hash apart: the test no longer holds a collision")
	}
	dims := []string{"http.route", "code"}
	td := ptrace.NewTraces()
	for _, svc := range []string{"checkout", "payments"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		rs.Resource().Attributes().PutStr("http.route", "/res")
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range 24 {
			sp := ss.Spans().AppendEmpty()
			sp.SetName([]string{a, b}[i%2])
			sp.SetStartTimestamp(1e15)
			sp.SetEndTimestamp(1e15 + 2_500_000)
			switch i % 3 {
			case 0:
				sp.Attributes().PutInt("code", 201)
			case 1:
				sp.Attributes().PutStr("code", "200")
			default:
				sp.Attributes().PutBool("code", true)
			}
			if i%4 < 2 {
				sp.Attributes().PutStr("http.route", "/res")
			}
		}
	}
	want := walkSpans(td, DefaultSpanKey, dims)
	keys := map[string]bool{}
	for _, w := range want {
		keys[w.ev.Key] = true
	}
	if len(keys) != 2*2*3 {
		t.Fatalf("%d series in the request, want 12", len(keys))
	}
	f, err := NewOTLPProto(SpanConfig{Dimensions: dims})
	if err != nil {
		t.Fatal(err)
	}
	body := protoOf(t, td)
	for pass := range 2 {
		sameEvents(t, fmt.Sprintf("pass %d", pass+1), decodeSpans(t, f, body), want)
	}
}
