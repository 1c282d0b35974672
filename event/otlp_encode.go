package event

import "encoding/binary"

// Span is a span as AppendOTLP writes it: what a span's event is made of.
type Span struct {
	Name       string
	Kind       int   // SPAN_KIND_*: 0 unspecified … 5 consumer
	Status     int   // STATUS_CODE_*: 0 unset, 1 ok, 2 error
	Start, End int64 // unix ns
	Attrs      []SpanAttr
	TraceID    [16]byte // all zero: none (not written)
	SpanID     [8]byte  // all zero: none (not written)
}

// SpanAttr is a span attribute: a string, or an integer when Int is set.
type SpanAttr struct {
	Key string
	Str string
	Int *int64
}

// AppendOTLP appends to dst an ExportTraceServiceRequest in protobuf's binary encoding (what
// NewOTLPProto reads, and the Collector's kafka exporter writes as otlp_proto): one resource
// of attribute service.name = service, one scope, spans, each with its ids when it has
// them. slide produce --otlp writes its records with it.
func AppendOTLP(dst []byte, service string, spans []Span) []byte {
	var scope []byte // ScopeSpans: spans = 2
	for i := range spans {
		scope = pbMessage(scope, 2, appendSpan(nil, &spans[i]))
	}
	var res []byte // Resource: attributes = 1
	res = pbMessage(res, 1, appendKV(nil, "service.name", service, nil))
	rs := pbMessage(nil, 1, res) // ResourceSpans: resource = 1
	rs = pbMessage(rs, 2, scope) // scope_spans = 2
	return pbMessage(dst, 1, rs) // ExportTraceServiceRequest: resource_spans = 1
}

// appendSpan appends sp's fields: trace_id = 1 and span_id = 2 (when not zero), name = 5,
// kind = 6, start = 7, end = 8, attributes = 9, status = 15 (code = 3).
func appendSpan(b []byte, sp *Span) []byte {
	if sp.TraceID != [16]byte{} {
		b = pbMessage(b, 1, sp.TraceID[:])
	}
	if sp.SpanID != [8]byte{} {
		b = pbMessage(b, 2, sp.SpanID[:])
	}
	b = pbMessage(b, 5, []byte(sp.Name))
	b = binary.AppendUvarint(append(b, 6<<3|wtVarint), uint64(sp.Kind))
	b = binary.LittleEndian.AppendUint64(append(b, 7<<3|wtFixed64), uint64(sp.Start))
	b = binary.LittleEndian.AppendUint64(append(b, 8<<3|wtFixed64), uint64(sp.End))
	for _, a := range sp.Attrs {
		b = pbMessage(b, 9, appendKV(nil, a.Key, a.Str, a.Int))
	}
	status := binary.AppendUvarint([]byte{3<<3 | wtVarint}, uint64(sp.Status))
	return pbMessage(b, 15, status)
}

// appendKV appends a KeyValue's fields: key = 1, value = 2, an AnyValue of string_value = 1
// or int_value = 3.
func appendKV(b []byte, key, str string, n *int64) []byte {
	b = pbMessage(b, 1, []byte(key))
	var v []byte
	if n != nil {
		v = binary.AppendUvarint([]byte{3<<3 | wtVarint}, uint64(*n))
	} else {
		v = pbMessage(nil, 1, []byte(str))
	}
	return pbMessage(b, 2, v)
}

// pbMessage appends field num, length-delimited, holding msg.
func pbMessage(b []byte, num int, msg []byte) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3|wtLen)
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}
