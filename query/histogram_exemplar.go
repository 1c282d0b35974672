package query

import (
	"encoding/hex"
	"math"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slide-metrics/slide/window"
)

// The exemplars of an exported native histogram (Histogram.exemplars, field 16), with
// Config.ExportExemplars (--export-exemplars): those the store keeps
// (window.StoreConfig.Exemplars) of the slots the window reads, oldest first, each with
// the labels trace_id and span_id as /api/v1/query_exemplars writes them (lower-case hex;
// span_id left out when the span had none), its value and its time.
// Prometheus (2.50 and later, with exemplar storage) ingests them from a protobuf scrape
// and drops a native histogram's exemplar that has no timestamp, so each carries one. The
// text formats (classic, OpenMetrics 1.0) have no place for them: there a native
// histogram is its count and sum.

// Label names of an exemplar, in the sorted order both paths write them.
var (
	labelSpanID  = "span_id"
	labelTraceID = "trace_id"
)

// Protobuf field numbers of io.prometheus.client.Exemplar and google.protobuf.Timestamp,
// and the lengths of the ids in hex.
const (
	fHistExemplars                                     = 16
	fExemplarLabel, fExemplarValue, fExemplarTimestamp = 1, 2, 3
	fTimestampSeconds, fTimestampNanos                 = 1, 2
	spanHexLen, traceHexLen                            = 16, 32
	idsHexLen                                          = spanHexLen + traceHexLen
)

// msTimestamp splits a Unix time in ms into a Timestamp's seconds and nanoseconds (in
// [0, 1e9), as the message requires).
func msTimestamp(ms int64) (sec int64, nanos int32) {
	sec = ms / 1000
	if ms%1000 < 0 {
		sec--
	}
	return sec, int32(ms-sec*1000) * 1_000_000
}

// exemplarMsg is one exemplar as client_golang's objects, in one allocation.
type exemplarMsg struct {
	x      dto.Exemplar
	lp     [2]dto.LabelPair
	labels [2]*dto.LabelPair
	value  float64
	ts     timestamppb.Timestamp
}

// dtoExemplars returns ex as a native histogram's exemplars (nil for none); the collector
// path's twin of appendExemplars.
func dtoExemplars(ex []window.Exemplar) []*dto.Exemplar {
	if len(ex) == 0 {
		return nil
	}
	ms := make([]exemplarMsg, len(ex))
	out := make([]*dto.Exemplar, len(ex))
	ids := make([]byte, 0, len(ex)*idsHexLen)
	for _, e := range ex {
		ids = hex.AppendEncode(ids, e.SpanID[:])
		ids = hex.AppendEncode(ids, e.TraceID[:])
	}
	all := string(ids) // one string; each label value is a piece of it
	for i, e := range ex {
		m := &ms[i]
		span, trace := all[i*idsHexLen:][:spanHexLen], all[i*idsHexLen+spanHexLen:][:traceHexLen]
		m.value = e.Value
		m.ts.Seconds, m.ts.Nanos = msTimestamp(e.TS)
		m.lp[1] = dto.LabelPair{Name: &labelTraceID, Value: &trace}
		m.labels[1] = &m.lp[1]
		m.x.Label = m.labels[1:]
		if e.SpanID != [8]byte{} {
			m.lp[0] = dto.LabelPair{Name: &labelSpanID, Value: &span}
			m.labels[0] = &m.lp[0]
			m.x.Label = m.labels[:]
		}
		m.x.Value, m.x.Timestamp = &m.value, &m.ts
		out[i] = &m.x
	}
	return out
}

// appendExemplars appends ex to a Histogram message as its exemplars field, each an
// io.prometheus.client.Exemplar: labels (span_id when the span had one, trace_id), value,
// timestamp.
func appendExemplars(b []byte, ex []window.Exemplar) []byte {
	for i := range ex {
		e := &ex[i]
		var ids [idsHexLen]byte
		span, trace := ids[:spanHexLen], ids[spanHexLen:]
		hex.Encode(span, e.SpanID[:])
		hex.Encode(trace, e.TraceID[:])
		sec, nanos := msTimestamp(e.TS)
		tsSize := 0
		if sec != 0 {
			tsSize += 1 + protowire.SizeVarint(uint64(sec))
		}
		if nanos != 0 {
			tsSize += 1 + protowire.SizeVarint(uint64(nanos))
		}
		spanLabel := 1 + protowire.SizeBytes(len(labelSpanID)) + 1 + protowire.SizeBytes(spanHexLen)
		traceLabel := 1 + protowire.SizeBytes(len(labelTraceID)) + 1 + protowire.SizeBytes(traceHexLen)
		size := 1 + protowire.SizeBytes(traceLabel) + 1 + 8 + 1 + protowire.SizeBytes(tsSize)
		hasSpan := e.SpanID != [8]byte{}
		if hasSpan {
			size += 1 + protowire.SizeBytes(spanLabel)
		}
		b = protowire.AppendTag(b, fHistExemplars, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		if hasSpan {
			b = appendLabelPair(b, spanLabel, labelSpanID, span)
		}
		b = appendLabelPair(b, traceLabel, labelTraceID, trace)
		b = protowire.AppendTag(b, fExemplarValue, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(e.Value))
		b = protowire.AppendTag(b, fExemplarTimestamp, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(tsSize))
		if sec != 0 {
			b = protowire.AppendTag(b, fTimestampSeconds, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(sec))
		}
		if nanos != 0 {
			b = protowire.AppendTag(b, fTimestampNanos, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(nanos))
		}
	}
	return b
}

// appendLabelPair appends an Exemplar's label field: a LabelPair of size bytes.
func appendLabelPair(b []byte, size int, name string, value []byte) []byte {
	b = protowire.AppendTag(b, fExemplarLabel, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = protowire.AppendTag(b, fLabelName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, fLabelValue, protowire.BytesType)
	return protowire.AppendBytes(b, value)
}
