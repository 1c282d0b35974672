package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/slide-metrics/slide/event"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/window"
)

// runDemo produces synthetic traffic to the topic until ctx ends.
func runDemo(ctx context.Context, c serveConfig, brokers []string, log *slog.Logger) error {
	gen, err := ingest.NewDemoGen(ingest.Demo{Keys: c.demoKeys, Rate: c.demoRate, Traces: true}) // exemplars on latency_ms too
	if err != nil {
		return err
	}
	p, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: brokers, Topic: c.topic, Dialer: c.conn.kafkaDialer})
	if err != nil {
		return err
	}
	defer p.Close()
	log.Info("demo traffic", "rate", c.demoRate, "keys", c.demoKeys)
	_, err = gen.Run(ctx, func(evs []window.Event) error { return p.SendEvents(ctx, evs) })
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

// demoSpanDimensions are the span attributes the demo's spans become labels by, unless
// --span-dimensions names others.
const demoSpanDimensions = "http.route,http.response.status_code"

// demoSpansPerSecond is the rate of the demo's OTLP spans, over its three services.
const demoSpansPerSecond = 30

// runDemoSpans feeds OpenTelemetry spans of three services (produce --otlp's) into in, the
// otlp_proto intake of POST /v1/traces, as an OTel Collector's otlphttp exporter pointed at
// this instance would, until ctx ends: a request of a few spans every 100 ms, so duration_ms
// per service, span name, kind, status, route and code shows without a second topic. Such
// spans are not in the log (as POST /v1/traces' are not).
func runDemoSpans(ctx context.Context, in *event.Intake, log *slog.Logger) {
	rng := rand.New(rand.NewPCG(7, 27))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var batch []event.Span
	var body []byte
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		svc := otlpServices[n%len(otlpServices)]
		now := time.Now()
		batch = svc.spans(batch[:0], rng, demoSpansPerSecond/10, now.UnixNano())
		body = event.AppendOTLP(body[:0], svc.name, batch)
		if res := in.Take(body, now.UnixMilli()); res.Accepted != len(batch) {
			log.Warn("demo spans refused", "accepted", res.Accepted, "spans", len(batch))
		}
	}
}

func printDemoHelp(w io.Writer, addr string) {
	base := "http://" + addr
	fmt.Fprintf(w, `
slide is running with demo traffic (tenant-1 … tenant-3 are the heavy, slow ones).

  dashboard   %[1]s/
  metrics     %[1]s/metrics
  ready       %[1]s/readyz

Try, from another terminal:

  curl -s '%[1]s/v1/window?metric=latency_ms&key=tenant-1&window=5m&q=0.5,0.95,0.99'
  curl -s -i -X POST %[1]s/v1/allow -d '{"policy":"api","key":"tenant-1","cost":1}'
  ./bin/slide query top --addr %[1]s --metric latency_ms --by p95 --k 5

`, base)
}
