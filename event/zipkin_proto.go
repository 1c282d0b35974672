package event

// Zipkin's proto3 encoding (zipkin_proto): a body is a ListOfSpans (zipkin.proto of
// openzipkin/zipkin-api: spans = 1), as Brave's and zipkin-reporter's senders write it with
// Encoding.PROTO3 and the Collector's kafka exporter with encoding zipkin_proto. Each span is
// read by the same wire scan as OTLP's (otlp_proto.go) into the same event as its JSON
// (zipkin.go): trace_id = 1 (8 or 16 bytes: 8 are the trace id's last, as the Collector's
// zipkin receiver places them), id = 3 (8 bytes), kind = 4 (1 CLIENT, 2 SERVER, 3 PRODUCER,
// 4 CONSUMER), name = 5, timestamp = 6 (fixed64 µs), duration = 7 (µs), local_endpoint = 8
// and remote_endpoint = 9 (service_name = 1), tags = 11 (map entries: key = 1, value = 2);
// annotations and the rest are skipped by their length. A malformed record, or a field read
// with another wire type, is refused whole, as OTLP's; an invalid id (another length or wire
// type) only leaves the event without ids.

// NewZipkinProto returns a decoder of Zipkin's proto3 encoding: each body a ListOfSpans
// (zipkin_proto).
func NewZipkinProto(cfg SpanConfig) (*SpanDecoder, error) {
	s, err := newSpanDecoder(cfg, false)
	if s != nil {
		s.zipkin = true
		s.zCode, s.zPeer = s.attrSlot([]byte(attrHTTPCode), false), s.attrSlot([]byte(attrPeer), false)
	}
	return s, err
}

// readZipkinProto reads a ListOfSpans: spans = 1.
func (s *SpanDecoder) readZipkinProto(b []byte) bool {
	var f pbField
	for i := 0; i < len(b); {
		at := i
		if i = s.pbNext(b, i, len(b), &f); i < 0 {
			return false
		}
		if f.num == 1 {
			if f.wt != wtLen {
				return s.wrongType(at)
			}
			if !s.zSpanProto(b, at, f.vs, f.ve) {
				return false
			}
		}
	}
	return true
}

// zSpanProto reads the span b[start:end] and makes its pending event, whose part is the
// span's field, from its tag at field (never empty, as the span may be).
func (s *SpanDecoder) zSpanProto(b []byte, field, start, end int) bool {
	s.zBegin()
	var z zFields
	var f pbField
	for i := start; i < end; {
		at := i
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		want := uint8(wtLen)
		switch f.num {
		case 1, 3:
			s.zIDProto(f, b)
			continue
		case 4, 7:
			want = wtVarint
		case 6:
			want = wtFixed64
		case 5, 8, 9, 11:
		default:
			continue
		}
		if f.wt != want {
			return s.wrongType(at)
		}
		switch f.num {
		case 4:
			z.kindNum = int64(min(f.v, 1<<31))
		case 5:
			s.span.name = attrVal{kind: valString, b: b[f.vs:f.ve]}
		case 6:
			z.ts = f.v
		case 7:
			z.dur = f.v
		case 8, 9:
			v := &z.svc
			if f.num == 9 {
				v = &z.peer
			}
			if !s.zEndpointProto(b, f.vs, f.ve, v) {
				return false
			}
		case 11:
			if !s.zTagProto(b, f.vs, f.ve, &z) {
				return false
			}
		}
	}
	s.zFinish(&z, b[field:end])
	return true
}

// zIDProto reads the span's trace_id (f.num 1: 8 or 16 bytes) or id (3: 8 bytes) from f; an
// id of another length or wire type leaves the span's event without ids.
func (s *SpanDecoder) zIDProto(f pbField, b []byte) {
	sp := &s.span
	switch {
	case f.num == 3:
		sp.setWireID(sp.spanID[:], b, f)
	case f.wt == wtLen && f.ve-f.vs == 8: // a 64-bit trace id: the last 8 bytes
		sp.traceID = [16]byte{}
		copy(sp.traceID[8:], b[f.vs:f.ve])
	default:
		sp.setWireID(sp.traceID[:], b, f)
	}
}

// zEndpointProto reads an Endpoint's service_name = 1 into v.
func (s *SpanDecoder) zEndpointProto(b []byte, start, end int, v *attrVal) bool {
	var f pbField
	for i := start; i < end; {
		at := i
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		if f.num == 1 {
			if f.wt != wtLen {
				return s.wrongType(at)
			}
			*v = attrVal{kind: valString, b: b[f.vs:f.ve]}
		}
	}
	return true
}

// zTagProto reads a tags map entry, key = 1 and value = 2, and keeps it.
func (s *SpanDecoder) zTagProto(b []byte, start, end int, z *zFields) bool {
	var f pbField
	var key []byte
	v := attrVal{kind: valString} // a value not given is the empty string, as proto3's
	for i := start; i < end; {
		at := i
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		if f.num == 1 || f.num == 2 {
			if f.wt != wtLen {
				return s.wrongType(at)
			}
			if f.num == 1 {
				key = b[f.vs:f.ve]
			} else {
				v = attrVal{kind: valString, b: b[f.vs:f.ve]}
			}
		}
	}
	s.zKeep(z, key, v)
	return true
}
