package ingest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
)

// BenchmarkInflateEndToEnd measures end-to-end ingest (as BenchmarkEndToEnd) of 100,000
// zstd-compressed events with the bounded codecs ("ours") and with kafka-go's own,
// unbounded ones put back in its codec table ("anchor"). Goal: the bound costs ≤ 5% of
// events/s.
func BenchmarkInflateEndToEnd(b *testing.B) {
	const events = 100_000
	c := kafkatest.Start(b, "events", 4)
	t0 := time.Now()
	g, err := NewDemoGen(Demo{Keys: 1000})
	if err != nil {
		b.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(c.Addr), Topic: c.Topic, Balancer: &kafka.Hash{}, Compression: kafka.Zstd,
		BatchSize: 1000, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	msgs := make([]kafka.Message, events)
	for i := range msgs {
		ev := g.Next(t0.UnixMilli() - int64(events-i))
		msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
	}
	for i := 0; i < events; i += 10_000 {
		if err := w.WriteMessages(context.Background(), msgs[i:i+10_000]...); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	end := logEnd(b, c, c.Topic)
	run := func(b *testing.B) {
		b.ReportAllocs()
		var busy time.Duration
		for i := 0; i < b.N; i++ {
			cfg := Config{Brokers: []string{c.Addr}, Topic: c.Topic, Group: fmt.Sprintf("bench-%s-%d", b.Name(), i),
				HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second, MaxWait: 500 * time.Millisecond}
			busy += timeConsume(b, cfg, func() time.Time { return t0 }, end, events).took
		}
		b.ReportMetric(float64(events*b.N)/busy.Seconds(), "events/s")
	}
	b.Run("ours", run)
	b.Run("anchor", func(b *testing.B) {
		setInflateBudget(DefaultMaxInflatedBytes) // installs the bounded codecs; take them out
		saved := compress.Codecs
		for i, cd := range compress.Codecs {
			if bc, ok := cd.(boundedCodec); ok {
				compress.Codecs[i] = bc.Codec
			}
		}
		defer func() { compress.Codecs = saved }()
		run(b)
	})
}

// BenchmarkInflate isolates the bound: inflating one zstd batch of 10,000 events (about
// 1 MiB) through the bounded reader ("ours") and through kafka-go's zstd reader directly
// ("anchor"), both into a bytes.Buffer as kafka-go does.
func BenchmarkInflate(b *testing.B) {
	g, err := NewDemoGen(Demo{Keys: 1000})
	if err != nil {
		b.Fatal(err)
	}
	var raw []byte
	for i := range 10_000 {
		raw = append(event.Append(raw, g.Next(int64(1_764_489_600_000+i))), '\n')
	}
	codec := compress.Zstd.Codec()
	if bc, ok := codec.(boundedCodec); ok {
		codec = bc.Codec
	}
	var z bytes.Buffer
	w := codec.NewWriter(&z)
	w.Write(raw)
	w.Close()
	data := z.Bytes()
	b.Run("ours", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if out, err := Inflate(4, data, DefaultMaxInflatedBytes); err != nil || len(out) != len(raw) {
				b.Fatal(len(out), err)
			}
		}
	})
	b.Run("anchor", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			r := codec.NewReader(bytes.NewReader(data))
			var out bytes.Buffer
			if _, err := out.ReadFrom(r); err != nil || out.Len() != len(raw) {
				b.Fatal(out.Len(), err)
			}
			r.Close()
		}
	})
}
