package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/ingest"
)

// otlpService is a service produce --otlp writes spans of: its routes, its median duration
// and how often it fails.
type otlpService struct {
	name     string
	routes   []string
	medianMs float64
	errRate  float64
}

var otlpServices = []otlpService{
	{"frontend", []string{"/", "/search", "/product/{id}"}, 25, 0.01},
	{"checkout", []string{"/cart", "/checkout"}, 60, 0.02},
	{"payments", []string{"/pay", "/refund"}, 120, 0.05},
}

// spans appends n spans of svc ending at now (unix ns): SERVER spans, each the root of a
// trace of its own (random ids), with http.route and http.response.status_code attributes,
// lognormal durations around the service's median, errors (status ERROR, code 500) at its
// rate.
func (svc otlpService) spans(dst []event.Span, rng *rand.Rand, n int, now int64) []event.Span {
	for range n {
		route := svc.routes[rng.IntN(len(svc.routes))]
		dur := int64(svc.medianMs * math.Exp(0.6*rng.NormFloat64()) * 1e6)
		code, status := int64(200), 0
		if rng.Float64() < svc.errRate {
			code, status = 500, 2
		}
		sp := event.Span{Name: "GET " + route, Kind: 2, Status: status, Start: now - dur, End: now,
			Attrs: []event.SpanAttr{{Key: "http.route", Str: route}, {Key: "http.response.status_code", Int: &code}}}
		binary.LittleEndian.PutUint64(sp.TraceID[:], rng.Uint64()|1) // never all zero
		binary.LittleEndian.PutUint64(sp.TraceID[8:], rng.Uint64())
		binary.LittleEndian.PutUint64(sp.SpanID[:], rng.Uint64()|1)
		dst = append(dst, sp)
	}
	return dst
}

// otlpPerRecord is how many spans a record of produce --otlp holds, as an exporter batches.
const otlpPerRecord = 50

// produceOTLP is `slide produce --otlp`: OpenTelemetry spans of three services, otlp_proto
// records (event.AppendOTLP, no pdata) keyed by service, at --rate spans per second, each
// span a SERVER span ending now with http.route and http.response.status_code attributes,
// lognormal durations, and errors (status ERROR, code 500) at each service's rate. With
// --zipkin the same spans as zipkin_json records (event.AppendZipkin), the status code as
// Zipkin's tag http.status_code.
func produceOTLP(ctx context.Context, c produceConfig, p *ingest.Producer, s stdio) error {
	runCtx := ctx
	if c.duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	rng := rand.New(rand.NewPCG(c.seed, 27))
	start := time.Now()
	var spans, records int64
	var sendErr error
	batch := make([]event.Span, 0, otlpPerRecord)
	format := "otlp_proto"
	if c.zipkin {
		format = "zipkin_json"
	}
	for runCtx.Err() == nil && sendErr == nil {
		svc := otlpServices[records%int64(len(otlpServices))]
		batch = svc.spans(batch[:0], rng, otlpPerRecord, time.Now().UnixNano())
		var body []byte
		if c.zipkin {
			for i := range batch {
				batch[i].Attrs[1].Key = "http.status_code" // Zipkin's tag
			}
			body = event.AppendZipkin(nil, svc.name, batch, rng.Uint64())
		} else {
			body = event.AppendOTLP(nil, svc.name, batch)
		}
		// Sends use ctx, not runCtx: the last record of the duration must not fail for being late.
		if sendErr = p.Send(ctx, []byte(svc.name), body); sendErr == nil {
			records++
			spans += otlpPerRecord
			producePace(runCtx, start, spans, c.rate)
		}
	}
	closeErr := p.Close()
	elapsed := time.Since(start)
	st := p.Stats()
	fmt.Fprintf(s.out, "sent %d spans (%d %s records, %d services) to %s on %s in %s: %.0f spans/s, %s\n",
		spans, st.Sent, format, len(otlpServices), c.topic, c.brokers, elapsed.Round(time.Millisecond),
		float64(spans)/elapsed.Seconds(), produceBytes(st.Bytes))
	return produceResult(st, sendErr, closeErr)
}
