package event

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// recentRequest is a request of two services' spans whose parts differ from one another by
// little: names a prefix of one another around the lengths of the cache's words (7, 8, 15,
// 16, 17 bytes), one attribute an integer, a string or a boolean, a dimension from the span
// or from its resource.
func recentRequest() ptrace.Traces {
	names := []string{"GET /pay/12345678", "GET /pa", "GET /pay/123456", "GET /pay/1234567", "GET /pay"}
	td := ptrace.NewTraces()
	for _, svc := range []string{"checkout", "payments"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		rs.Resource().Attributes().PutStr("http.route", "/res")
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range 60 {
			sp := ss.Spans().AppendEmpty()
			sp.SetName(names[i%5])
			sp.SetStartTimestamp(1e15)
			sp.SetEndTimestamp(1e15 + 2_500_000)
			switch i % 3 {
			case 0:
				sp.Attributes().PutInt("code", 1)
			case 1:
				sp.Attributes().PutStr("code", "200")
			default:
				sp.Attributes().PutBool("code", true)
			}
			if i%4 < 2 {
				sp.Attributes().PutStr("http.route", "/pay")
			}
		}
	}
	return td
}

// A span takes its series from the recent cache only when its parts equal those its slot's
// series was written from: with every slot holding one span's series, the others, each of a
// part differing from it by little, give what pdata's walk says, read once and again.
func TestOTLPRecentSeries(t *testing.T) {
	dims := []string{"http.route", "code"}
	td := recentRequest()
	want := walkSpans(td, DefaultSpanKey, dims)
	keys := map[string]bool{}
	for _, w := range want {
		keys[w.ev.Key] = true
	}
	if len(keys) != 2*5*3*2 {
		t.Fatalf("%d series in the request, want 60", len(keys))
	}
	f, err := NewOTLPProto(SpanConfig{Dimensions: dims})
	if err != nil {
		t.Fatal(err)
	}
	body := protoOf(t, td)
	sameEvents(t, "read once", decodeSpans(t, f, body), want)
	// The last span's series in every slot: each other span meets it in its own.
	last := f.recent[f.rslot]
	if last.key != want[len(want)-1].ev.Key {
		t.Fatalf("the last span's slot holds %q, want %q", last.key, want[len(want)-1].ev.Key)
	}
	for pass := range 2 {
		for i := range f.recent {
			f.recent[i] = last
		}
		sameEvents(t, fmt.Sprintf("read again, pass %d", pass+1), decodeSpans(t, f, body), want)
	}
	// A span of the slot's parts takes the slot's series: the cache is looked at.
	for i := range f.recent {
		f.recent[i] = last
		f.recent[i].key = "from the cache"
	}
	got := decodeSpans(t, f, body)
	if k := got[len(got)-1].ev.Key; k != "from the cache" {
		t.Fatalf("the last span again: series %q, not its slot's", k)
	}
}

// A part's length is one of its words: strings equal but for trailing zero bytes (which the
// words' masks leave as they are) are different parts, so a span named "GET /pay\x00" after
// one named "GET /pay" is refused (a control character), not given its series; and the
// other way round.
func TestOTLPRecentLength(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	ss := rs.ScopeSpans().AppendEmpty()
	for _, name := range []string{"GET /pay", "GET /pay\x00", "GET /pay", "", "\x00", "", "GET /pay/12345678\x00", "GET /pay/1234567\x00", "GET /pay/1234567"} {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(name)
		sp.SetStartTimestamp(1e15)
		sp.SetEndTimestamp(1e15 + 2_500_000)
	}
	want := walkSpans(td, DefaultSpanKey, nil)
	if want[1].r == ReasonNone || want[0].r != ReasonNone {
		t.Fatalf("pdata's walk: %v and %v, want the second span refused", want[0].r, want[1].r)
	}
	f, err := NewOTLPProto(SpanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	body := protoOf(t, td)
	for pass := range 2 {
		sameEvents(t, fmt.Sprintf("pass %d", pass+1), decodeSpans(t, f, body), want)
	}
}

// A resource's string part of more than 16 bytes is taken as a number given to its bytes:
// spans of services named alike past their 16th byte, and of more services than the
// numbers remembered, get what pdata's walk says, read once and again; and a span of a long
// service's takes its series from the cache.
func TestOTLPRecentLongResource(t *testing.T) {
	td := ptrace.NewTraces()
	for i := range 7 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("checkout-service-production-%d", i%5))
		rs.Resource().Attributes().PutStr("deployment.environment", []string{"production-eu-west-1", "prod"}[i%2])
		ss := rs.ScopeSpans().AppendEmpty()
		for j := range 6 {
			sp := ss.Spans().AppendEmpty()
			sp.SetName([]string{"GET /pay", "GET /cart"}[j%2])
			sp.SetStartTimestamp(1e15)
			sp.SetEndTimestamp(1e15 + 2_500_000)
			if j%3 == 0 {
				sp.Attributes().PutStr("deployment.environment", "staging-eu-west-1-a")
			}
		}
	}
	dims := []string{"deployment.environment"}
	want := walkSpans(td, DefaultSpanKey, dims)
	body := protoOf(t, td)
	for _, longMax := range []int{0, 2} { // the default, and fewer than the request's names
		f, err := NewOTLPProto(SpanConfig{Dimensions: dims})
		if err != nil {
			t.Fatal(err)
		}
		f.rres.longMax = longMax
		for pass := range 3 {
			sameEvents(t, fmt.Sprintf("at most %d long parts, pass %d", longMax, pass+1), decodeSpans(t, f, body), want)
		}
		if longMax != 0 {
			continue
		}
		last := f.rslot
		if last < 0 {
			t.Fatal("the last span, of a long service name, was not looked up in the cache")
		}
		f.recent[last].key = "from the cache"
		if got := decodeSpans(t, f, body); got[len(got)-1].ev.Key != "from the cache" {
			t.Fatalf("the last span again: series %q, not its slot's", got[len(got)-1].ev.Key)
		}
	}
}
