package event

import (
	"slices"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/translator/zipkin/zipkinv2"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/window"
)

// benchDims are the dimensions both sides read: two span attributes and a resource one.
var benchDims = []string{"http.route", "http.response.status_code", "deployment.environment"}

// benchRequests are 16 requests of 80 spans each (testRequest), written by pdata's marshaler.
func benchRequests(b *testing.B, marshal func(ptrace.Traces) ([]byte, error)) [][]byte {
	out := make([][]byte, 16)
	for i := range out {
		body, err := marshal(testRequest(uint64(i)))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = body
	}
	return out
}

// pdataWalk reads from pdata's objects what our decoder reads from the wire: each span's
// service, name, kind, status, start and end, and the dimension attributes, as text.
func pdataWalk(td ptrace.Traces) (spans int, sink float64) {
	for _, rs := range td.ResourceSpans().All() {
		ra := rs.Resource().Attributes()
		svc, _ := ra.Get(DefaultSpanKey)
		key := svc.AsString()
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				n := len(key) + len(sp.Name()) + len(sp.Kind().String()) + len(sp.Status().Code().String())
				for _, d := range benchDims {
					v, ok := sp.Attributes().Get(d)
					if !ok {
						v, ok = ra.Get(d)
					}
					if ok {
						n += len(v.AsString())
					}
				}
				sink += float64(sp.EndTimestamp()-sp.StartTimestamp())/1e6 + float64(n)
				spans++
			}
		}
	}
	return spans, sink
}

// benchOTLP runs ours and the anchor over the same requests: one op is one request of 80
// spans; ns/span and spans/s say the same per span, cpu_ns/span by the process's CPU time (on
// a shared machine wall time mostly measures the others; the anchor's garbage collection is
// its own cost).
func benchOTLP(b *testing.B, bodies [][]byte, newDec func(SpanConfig) (*SpanDecoder, error), unmarshal func([]byte) (ptrace.Traces, error)) {
	var cpu0 time.Duration
	perSpan := func(b *testing.B, spans int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
		b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(spans), "cpu_ns/span")
	}
	b.Run("ours", func(b *testing.B) {
		d, err := newDec(SpanConfig{Dimensions: benchDims})
		if err != nil {
			b.Fatal(err)
		}
		spans := 0
		var sink float64
		fn := func(_ []byte, ev window.Event, r Reason) {
			if r != ReasonNone {
				b.Fatal(r)
			}
			sink += ev.Value
		}
		b.ReportAllocs()
		cpu0 = cpuTime()
		for i := 0; b.Loop(); i++ {
			spans += d.DecodeLines(bodies[i&15], 0, fn)
		}
		perSpan(b, spans)
		_ = sink
	})
	b.Run("anchor", func(b *testing.B) {
		spans := 0
		var sink float64
		b.ReportAllocs()
		cpu0 = cpuTime()
		for i := 0; b.Loop(); i++ {
			td, err := unmarshal(bodies[i&15])
			if err != nil {
				b.Fatal(err)
			}
			n, s := pdataWalk(td)
			spans, sink = spans+n, sink+s
		}
		perSpan(b, spans)
		_ = sink
	})
}

// BenchmarkOTLPProto: otlp_proto records (80 spans each) into events vs pdata's
// ProtoUnmarshaler and a walk over its spans reading the same fields.
func BenchmarkOTLPProto(b *testing.B) {
	var pm ptrace.ProtoMarshaler
	var pu ptrace.ProtoUnmarshaler
	benchOTLP(b, benchRequests(b, pm.MarshalTraces), NewOTLPProto, pu.UnmarshalTraces)
}

// BenchmarkOTLPJSON: otlp_json records (80 spans each) into events vs pdata's
// JSONUnmarshaler and the same walk.
func BenchmarkOTLPJSON(b *testing.B) {
	var jm ptrace.JSONMarshaler
	var ju ptrace.JSONUnmarshaler
	benchOTLP(b, benchRequests(b, jm.MarshalTraces), NewOTLPJSON, ju.UnmarshalTraces)
}

// BenchmarkOTLPProtoInterleaved times BenchmarkOTLPProto's two sides in alternating bursts of
// the 16 requests (1,280 spans), so that both meet the same load of a shared machine, and
// reports the fastest burst of each per span and their ratio (the anchor's garbage collection
// falls in its bursts only as it happens to).
func BenchmarkOTLPProtoInterleaved(b *testing.B) {
	var pm ptrace.ProtoMarshaler
	var pu ptrace.ProtoUnmarshaler
	bodies := benchRequests(b, pm.MarshalTraces)
	d, err := NewOTLPProto(SpanConfig{Dimensions: benchDims})
	if err != nil {
		b.Fatal(err)
	}
	var sink float64
	fn := func(_ []byte, ev window.Event, r Reason) {
		if r != ReasonNone {
			b.Fatal(r)
		}
		sink += ev.Value
	}
	var ours, anchor []float64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		spans := 0
		for _, body := range bodies {
			spans += d.DecodeLines(body, 0, fn)
		}
		t1 := time.Now()
		for _, body := range bodies {
			td, err := pu.UnmarshalTraces(body)
			if err != nil {
				b.Fatal(err)
			}
			_, s := pdataWalk(td)
			sink += s
		}
		t2 := time.Now()
		ours = append(ours, float64(t1.Sub(t0).Nanoseconds())/float64(spans))
		anchor = append(anchor, float64(t2.Sub(t1).Nanoseconds())/float64(spans))
	}
	o, a := slices.Min(ours), slices.Min(anchor)
	b.ReportMetric(o, "ours_ns/span")
	b.ReportMetric(a, "anchor_ns/span")
	b.ReportMetric(o/a, "ours/anchor")
	_ = sink
}

// BenchmarkZipkinJSON: the same requests as Zipkin's JSON (written by the Collector's
// zipkin_json marshaler), ours against what the Collector's kafka receiver does with them
// (contrib's zipkinv2 JSON unmarshaler, into pdata) and the same walk.
func BenchmarkZipkinJSON(b *testing.B) {
	zm := zipkinv2.NewJSONTracesMarshaler()
	marshal := func(td ptrace.Traces) ([]byte, error) { return zm.MarshalTraces(measurable(td)) }
	benchOTLP(b, benchRequests(b, marshal), NewZipkinJSON, zipkinv2.NewJSONTracesUnmarshaler(false).UnmarshalTraces)
}

// BenchmarkZipkinProto: the same as Zipkin's proto3 (the Collector's zipkin_proto marshaler),
// ours against the Collector's zipkin receiver (contrib's zipkinv2 proto3 unmarshaler) and
// the same walk.
func BenchmarkZipkinProto(b *testing.B) {
	zm := zipkinv2.NewProtobufTracesMarshaler()
	marshal := func(td ptrace.Traces) ([]byte, error) { return zm.MarshalTraces(measurable(td)) }
	benchOTLP(b, benchRequests(b, marshal), NewZipkinProto, zipkinv2.NewProtobufTracesUnmarshaler(false, false).UnmarshalTraces)
}
