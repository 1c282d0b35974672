package ingest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
)

// BenchmarkEndToEndSpans is BenchmarkEndToEnd for OpenTelemetry spans: one op reads the whole
// pre-produced topic, 2,000 otlp_proto records of 80 spans each (pdata's ProtoMarshaler, 4
// services, a route dimension) over 4 partitions. "ours" is a Consumer of --event-format
// otlp_proto into a fresh store; "anchor" the bare kafka-go fetch loop over the same records.
// spans/s counts the spans both carried through; cpu_ms/op and gc/op are as BenchmarkEndToEnd's.
//
// The broker runs in the test's process, so its garbage (~150 MB an op) sets how often both
// sides collect. SLIDE_BENCH_BROKER=host:port runs the pair against a broker of its own
// (`slide broker --addr host:port`) instead, a topic of its own per run: cpu_ms/op and gc/op
// are then the two sides' own (by-hand.md, "Spans end to end: round 11").
func BenchmarkEndToEndSpans(b *testing.B) {
	const records, perRecord = 2000, 80
	c := benchBroker(b, "spans", 4)
	t0 := time.Now()
	clock := func() time.Time { return t0 }
	rng := rand.New(rand.NewPCG(80, 2))
	msgs := make([]kafka.Message, records)
	var size int64
	for i := range msgs {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		svc := fmt.Sprintf("service-%d", i%4)
		rs.Resource().Attributes().PutStr("service.name", svc)
		ss := rs.ScopeSpans().AppendEmpty()
		for range perRecord {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{byte(rng.IntN(256)), 1})
			sp.SetSpanID(pcommon.SpanID{byte(rng.IntN(256)), 2})
			route := []string{"/pay", "/cart", "/checkout"}[rng.IntN(3)]
			sp.SetName("GET " + route)
			sp.SetKind(ptrace.SpanKindServer)
			endNs := t0.Add(-time.Duration(rng.Int64N(int64(time.Minute)))).UnixNano()
			sp.SetStartTimestamp(pcommon.Timestamp(endNs - rng.Int64N(2e9)))
			sp.SetEndTimestamp(pcommon.Timestamp(endNs))
			sp.Attributes().PutStr("http.route", route)
			sp.Attributes().PutInt("http.response.status_code", 200)
		}
		body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = kafka.Message{Key: []byte(svc), Value: body}
		size += int64(len(body))
	}
	for i := 0; i < records; i += 50 { // a batch under the broker's 1 MiB
		c.Produce(b, msgs[i:i+50]...)
	}
	end := logEnd(b, c, c.Topic)
	const maxWait = 500 * time.Millisecond
	const spans = records * perRecord

	b.Run("ours", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var sum opCost
		for i := 0; i < b.N; i++ {
			cfg := Config{Brokers: []string{c.Addr}, Topic: c.Topic, Group: fmt.Sprintf("spans-%d", i),
				HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second, MaxWait: maxWait,
				Format: func() (event.Format, error) {
					return event.NewOTLPProto(event.SpanConfig{Dimensions: []string{"http.route"}})
				}}
			sum.add(timeConsume(b, cfg, clock, end, spans))
		}
		sum.report(b, spans, "spans/s")
	})
	b.Run("anchor", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var sum opCost
		for i := 0; i < b.N; i++ {
			sum.add(timeFetch(b, c, end, records, maxWait))
		}
		sum.report(b, spans, "spans/s")
	})
}

// benchBroker is kafkatest.Start's broker in process, or with SLIDE_BENCH_BROKER set the
// broker at that address, with a new topic of partitions named after topic.
func benchBroker(b *testing.B, topic string, partitions int) *kafkatest.Cluster {
	addr := os.Getenv("SLIDE_BENCH_BROKER")
	if addr == "" {
		return kafkatest.Start(b, topic, partitions)
	}
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		b.Fatalf("SLIDE_BENCH_BROKER=%s: %v", addr, err)
	}
	defer conn.Close()
	topic = fmt.Sprintf("%s-%d", topic, time.Now().UnixNano())
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}); err != nil {
		b.Fatalf("SLIDE_BENCH_BROKER=%s: creating topic %s: %v", addr, topic, err)
	}
	return &kafkatest.Cluster{Addr: addr, Topic: topic, Partitions: partitions}
}
