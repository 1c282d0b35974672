package reliability_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// sample is one value of a group the oracle keeps: the values sent, sorted before checking.
type sample map[string][]float64

// groupAnswer is a /v1/window answer with by=.
type groupAnswer struct {
	Groups []struct {
		Labels    map[string]string
		Count     int
		Sum       float64
		Min, Max  *float64
		Quantiles map[string]*float64
	}
}

// checkGroups reads metric's key by labels from s and compares each group with the oracle's
// values: the same groups, counts and sums exactly (whole milliseconds: exact float sums in
// any order), min and max exactly, p95 within the sketch's 1% of the rank int(q·(n−1)).
func checkGroups(t *testing.T, s *slide, metric, key string, by []string, want sample) {
	t.Helper()
	q := url.Values{"metric": {metric}, "key": {key}, "window": {"5m"}, "by": {strings.Join(by, ",")}, "q": {"0.95"}}
	var a groupAnswer
	if err := proctest.GetJSON(s.base+"/v1/window?"+q.Encode(), &a); err != nil {
		t.Fatalf("%s %s by %v: %v", metric, key, by, err)
	}
	var got []string
	for _, g := range a.Groups {
		var parts []string
		for _, l := range by {
			parts = append(parts, l+"="+g.Labels[l])
		}
		name := strings.Join(parts, ",")
		got = append(got, name)
		vals := slices.Sorted(slices.Values(want[name]))
		if len(vals) == 0 {
			t.Errorf("%s %s: group %s was never sent", metric, key, name)
			continue
		}
		sum := 0.0
		for _, v := range vals {
			sum += v
		}
		p95 := vals[int(0.95*float64(len(vals)-1))]
		switch {
		case g.Count != len(vals) || g.Sum != sum:
			t.Errorf("%s %s %s: count %d sum %v, sent %d summing to %v", metric, key, name, g.Count, g.Sum, len(vals), sum)
		case g.Min == nil || g.Max == nil || *g.Min != vals[0] || *g.Max != vals[len(vals)-1]:
			t.Errorf("%s %s %s: min/max %v/%v, sent %v/%v", metric, key, name, g.Min, g.Max, vals[0], vals[len(vals)-1])
		case g.Quantiles["0.95"] == nil || math.Abs(*g.Quantiles["0.95"]-p95) > 0.01*p95:
			t.Errorf("%s %s %s: p95 %v, nearest rank %v", metric, key, name, g.Quantiles["0.95"], p95)
		}
	}
	var sent []string
	for name := range want {
		sent = append(sent, name)
	}
	slices.Sort(got)
	slices.Sort(sent)
	if !slices.Equal(got, sent) {
		t.Errorf("%s %s by %v: groups %v, sent %v", metric, key, by, got, sent)
	}
}

// TestRealFormatsThroughSlideBroker is #27's "done when" at process level: OpenTelemetry span
// records as pdata's marshaler writes them (what the Collector's kafka exporter sends) and
// Envoy Gateway access-log lines, produced to a `slide broker` process, read by a `slide serve`
// each (--event-format otlp_proto with two dimensions; --event-map envoy): every group of
// labels is exactly what was sent, with its count, sum, min and max exact and its p95 within
// 1%, and the error counts per status exact.
func TestRealFormatsThroughSlideBroker(t *testing.T) {
	_, brokers := brokerProc(t)
	rng := rand.New(rand.NewPCG(27, 2))
	now := time.Now()

	// Spans: 3 services, 2 routes each, errors (500, STATUS_CODE_ERROR) one in ten.
	spansP, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: []string{brokers}, Topic: "spans", BatchTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	spanOracle := map[string]sample{}
	services := map[string][]string{"frontend": {"/", "/search"}, "checkout": {"/cart", "/checkout"}, "payments": {"/pay", "/refund"}}
	for rec := range 30 {
		svc := []string{"frontend", "checkout", "payments"}[rec%3]
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for range 40 {
			route := services[svc][rng.IntN(2)]
			ms := float64(1 + rng.IntN(800)) // whole ms
			code, status := int64(200), ptrace.StatusCodeUnset
			if rng.IntN(10) == 0 {
				code, status = 500, ptrace.StatusCodeError
			}
			end := now.Add(-time.Duration(rng.IntN(30_000)) * time.Millisecond)
			sp := spans.AppendEmpty()
			sp.SetName("GET " + route)
			sp.SetKind(ptrace.SpanKindServer)
			sp.Status().SetCode(status)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-time.Duration(ms) * time.Millisecond)))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
			sp.Attributes().PutStr("http.route", route)
			sp.Attributes().PutInt("http.response.status_code", code)
			if spanOracle[svc] == nil {
				spanOracle[svc] = sample{}
			}
			g := fmt.Sprintf("http_route=%s,http_response_status_code=%d,status_code=%s", route, code, "STATUS_CODE_"+strings.ToUpper(status.String()))
			spanOracle[svc][g] = append(spanOracle[svc][g], ms)
		}
		body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		if err := spansP.Send(context.Background(), []byte(svc), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := spansP.Close(); err != nil {
		t.Fatal(err)
	}

	// Envoy Gateway's default JSON access log: 2 upstream clusters, 503s one in eight.
	logsP, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: []string{brokers}, Topic: "access", BatchTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	logOracle := map[string]sample{}
	for i := range 600 {
		cluster := []string{"httproute/default/pay/rule/0", "httproute/default/cart/rule/0"}[i%2]
		code, method := 200, []string{"GET", "POST"}[rng.IntN(2)]
		if rng.IntN(8) == 0 {
			code = 503
		}
		ms := 1 + rng.IntN(400)
		start := now.Add(-time.Duration(rng.IntN(30_000)) * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z")
		line := fmt.Sprintf(`{"start_time":%q,"method":%q,"x-envoy-origin-path":"/x","protocol":"HTTP/1.1","response_code":%d,"response_flags":"-","bytes_received":0,"bytes_sent":%d,"duration":%d,"x-request-id":"r%d","upstream_host":"10.0.0.1:3000","upstream_cluster":%q}`,
			start, method, code, 100+i, ms, i, cluster)
		if logOracle[cluster] == nil {
			logOracle[cluster] = sample{}
		}
		g := fmt.Sprintf("code=%d", code)
		logOracle[cluster][g] = append(logOracle[cluster][g], float64(ms))
		if err := logsP.Send(context.Background(), []byte(cluster), []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := logsP.Close(); err != nil {
		t.Fatal(err)
	}

	spansSrv := startSlide(t, "serve otlp_proto", brokers, "g-spans", "--topic", "spans", "--event-format", "otlp_proto",
		"--span-dimensions", "http.route,http.response.status_code", "--snapshot-interval", "0")
	logsSrv := startSlide(t, "serve envoy", brokers, "g-access", "--topic", "access", "--event-map", "envoy", "--snapshot-interval", "0")
	eventually(t, 30*time.Second, "both instances read their topic to its end", func() bool {
		return spansSrv.caughtUp(t) && logsSrv.caughtUp(t)
	})
	for svc, want := range spanOracle {
		checkGroups(t, spansSrv, "duration_ms", svc, []string{"http_route", "http_response_status_code", "status_code"}, want)
	}
	for cluster, want := range logOracle {
		checkGroups(t, logsSrv, "latency_ms", cluster, []string{"code"}, want)
	}
	if n := spansSrv.metric(t, "slide_ingest_rejected_total") + logsSrv.metric(t, "slide_ingest_rejected_total"); n != 0 {
		t.Errorf("%v events refused; every one sent was valid", n)
	}
}
