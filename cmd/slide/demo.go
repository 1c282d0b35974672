package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/window"
)

// runDemo produces synthetic traffic to the topic until ctx ends.
func runDemo(ctx context.Context, c serveConfig, brokers []string, log *slog.Logger) error {
	gen, err := ingest.NewDemoGen(ingest.Demo{Keys: c.demoKeys, Rate: c.demoRate})
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
