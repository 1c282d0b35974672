package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/window"
)

// TestConsumerOTLPLogs: Envoy access log lines the Collector ships as OTLP logs (filelog
// receiver, kafka exporter, otlp_proto: pdata's ProtoMarshaler) go through the embedded broker
// into a consumer of otlp_logs with the envoy map: each series' count is exactly the lines
// sent, and a record whose body is a kvlist and a record that is not a request are refused
// by their reasons.
func TestConsumerOTLPLogs(t *testing.T) {
	c := kafkatest.Start(t, "access", 2)
	t0 := time.Now()
	clusters := []string{"httproute/default/pay/rule/0", "httproute/default/cart/rule/0"}
	truth := map[string]uint64{} // series string → lines
	var msgs []kafka.Message
	for r := range 30 {
		ld := plog.NewLogs()
		sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
		for i := range 10 + r%7 {
			cluster, code := clusters[(r+i)%2], 200+(i%3)*100
			at := t0.Add(-time.Duration(r*1000+i) * time.Millisecond)
			lr := sl.LogRecords().AppendEmpty()
			lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(t0))
			lr.Attributes().PutStr("log.file.name", "/var/log/envoy/access.log")
			lr.Body().SetStr(fmt.Sprintf(`{"start_time":%q,"method":"GET","response_code":%d,"response_flags":"-","bytes_sent":%d,"duration":%d,"upstream_cluster":%q}`,
				at.UTC().Format("2006-01-02T15:04:05.000Z"), code, 100+i, 3+i, cluster))
			series, err := window.AppendSeries(nil, cluster, []window.Label{{Name: "code", Value: fmt.Sprint(code)}, {Name: "flags", Value: "-"}, {Name: "method", Value: "GET"}})
			if err != nil {
				t.Fatal(err)
			}
			truth[string(series)]++
		}
		if r == 5 { // json_parser with parse_to: body
			lr := sl.LogRecords().AppendEmpty()
			lr.Body().SetEmptyMap().PutInt("duration", 3)
		}
		body, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(r)), Value: body})
	}
	msgs = append(msgs, kafka.Message{Key: []byte("x"), Value: []byte{0x0a, 0x7f, 0x01}}) // a length past the record
	c.Produce(t, msgs...)

	cfg := testConfig(c, "otlp-logs")
	m, _ := event.Preset("envoy")
	cfg.Format = func() (event.Format, error) { return event.NewOTLPLogs(m, event.Config{}) }
	store := newTestStore(t, 0)
	r := start(t, cfg, store, t0)
	eventually(t, 20*time.Second, "the logs", func() bool { return caughtUp(t, c, r) }, progress(r))

	var lines uint64
	for series, n := range truth {
		for _, metric := range []string{"latency_ms", "bytes_sent"} {
			a, err := store.ReadAt(t0.UnixMilli(), metric, series, 5*time.Minute, nil)
			if err != nil {
				t.Fatalf("%s %q: %v", metric, series, err)
			}
			if a.Count != n {
				t.Errorf("%s %q: count %d, sent %d", metric, series, a.Count, n)
			}
		}
		lines += n
	}
	if got := sum(r.m.events); got != float64(2*lines) {
		t.Errorf("slide_ingest_events_total = %v, want two a line of %d", got, lines)
	}
	if bf, br := sum(r.m.rejectedBy[event.ReasonBadField]), sum(r.m.rejectedBy[event.ReasonBadRecord]); bf != 1 || br != 1 || sum(r.m.rejected) != 2 {
		t.Errorf("refusals: bad_field %v, bad_record %v, all %v; want one each", bf, br, sum(r.m.rejected))
	}
}
