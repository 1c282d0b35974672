package query_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/query"
)

// TestWindowEndToEndThroughKafka: events produced with the real kafka-go client to the
// embedded Kafka-protocol broker, consumed by ingest's consumer group into the store, and
// others posted to /v1/events, are answered by /v1/window as the exact oracle over both.
// The broker and the group need real time; the waits are bounded.
func TestWindowEndToEndThroughKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	broker, err := ingest.StartBroker(ctx, ingest.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2})
	if err != nil {
		t.Fatalf("starting the embedded broker: %v", err)
	}
	t.Cleanup(func() { broker.Close() })

	now := t0 + 5*60_000 // the consumer's and the server's clock
	var consumer *ingest.Consumer
	e := newEnv(t, func(c *query.Config) {
		consumer, err = ingest.New(ingest.Config{
			Brokers: broker.Addrs(), Topic: ingest.DefaultTopic, Group: "query-e2e",
			CommitInterval: 50 * time.Millisecond, SessionTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
			RebalanceTimeout: 2 * time.Second, JoinGroupBackoff: 100 * time.Millisecond, MaxWait: 500 * time.Millisecond,
		}, c.Store, ingest.WithClock(func() time.Time { return time.UnixMilli(now) }))
		if err != nil {
			t.Fatal(err)
		}
		c.Ready = func() error {
			if !consumer.Ready() {
				return errors.New("restoring windows from Kafka")
			}
			return nil
		}
	})
	e.clock.set(now)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumer.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("consumer: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("consumer did not stop within 15 s")
		}
	})

	// Five minutes of traffic: even batches through Kafka, odd ones through HTTP.
	tr := newTraffic(3)
	o := &oracle{}
	var msgs []kafka.Message
	for end := t0 + 5000; end <= now; end += 5000 {
		evs := tr.batch(end)
		o.evs = append(o.evs, evs...)
		if (end/5000)%2 == 0 {
			e.post(ndjson(evs))
			continue
		}
		for _, ev := range evs {
			msgs = append(msgs, kafka.Message{Key: []byte(ev.key), Value: []byte(ev.line()), Time: time.UnixMilli(ev.ts)})
		}
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker.Addrs()...), Topic: ingest.DefaultTopic, Balancer: &kafka.Hash{},
		BatchSize: len(msgs), BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing %d records: %v", len(msgs), err)
	}
	w.Close()

	// Wait until the windows hold every event of the span they report.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, b, _ := e.do("GET", "/v1/window?metric=latency_ms&key=*&window=5m&q=0.5", nil)
		var a windowAnswer
		if code == 200 && jsonInto(b, &a) == nil && a.Count == o.over("latency_ms", globFunc("*"), a.From, a.To).count {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the windows hold %s (%d records produced)", b, len(msgs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	qs := []string{"0.5", "0.95", "0.99"}
	for _, win := range []string{"30s", "2m", "5m"} {
		for _, k := range []string{"tenant-01", "tenant-10", "other-1"} {
			checkWindow(t, e, o, "latency_ms", k, win, qs, 1)
		}
		checkWindow(t, e, o, "latency_ms", "tenant-*", win, qs, 12)
		checkWindow(t, e, o, "latency_ms", "*", win, qs, 14)
	}
}
