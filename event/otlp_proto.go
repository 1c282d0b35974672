package event

import (
	"encoding/binary"
	"math"
)

// OTLP/protobuf is read by a wire scan over the body, never an object tree: each message is a
// range of the body whose fields are read in place (a string is the body's bytes until it
// becomes a label or a key, which are interned), the messages the events need entered, every
// other field skipped by its length. The wire is checked where it is read: the request, its
// ResourceSpans, Resource, ScopeSpans, Span and Status, every KeyValue of a resource's or a
// span's attributes and their AnyValues down to maxAnyDepth; a field skipped (a scope, events,
// links) only for its length, which must end within its message. A span's ids are read, but
// never refuse it: an id of another length or wire type is an invalid id, and the span's event
// carries no ids (OTLP reads an invalid id as empty; the span's duration is still good data). A tag of field 0, a group
// (wire types 3 and 4), a varint past ten bytes or the record's end, a length past its message,
// a field the scan reads given with another wire type, or AnyValue nesting past maxAnyDepth is
// a malformed record: ReasonBadRecord for the body whole.
//
// The field numbers are opentelemetry-proto's (trace/v1/trace.proto, common/v1/common.proto,
// resource/v1/resource.proto, collector/trace/v1/trace_service.proto).

// Wire types.
const (
	wtVarint  = 0
	wtFixed64 = 1
	wtLen     = 2
	wtFixed32 = 5
)

// pbField is one field as pbNext read it: its number and wire type; its value for a varint or
// a fixed width; its bytes b[vs:ve] for a length-delimited one.
type pbField struct {
	num    uint64
	wt     uint8
	v      uint64
	vs, ve int
}

// pbVarint reads the varint at b[i:end]: its value and the index after it, −1 when it is
// truncated or longer than ten bytes. The one-byte varint (every tag of OTLP, most lengths)
// is read inline.
func pbVarint(b []byte, i, end int) (uint64, int) {
	if i < end && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return pbVarintLong(b, i, end)
}

func pbVarintLong(b []byte, i, end int) (uint64, int) {
	if i >= end || i < 0 {
		return 0, -1
	}
	v, n := binary.Uvarint(b[i:end])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

// pbScan is the state of a wire scan: why the body is not its message (bad). SpanDecoder and
// LogsDecoder (otlp_logs.go) read with it.
type pbScan struct {
	bad badRecord
}

// pbNext reads the field at b[i] within end into f and returns the index after it, or −1 with
// s.bad saying what is wrong.
func (s *pbScan) pbNext(b []byte, i, end int, f *pbField) int {
	at := i
	tag, i := pbVarint(b, i, end)
	if i < 0 {
		return s.malformed("truncated tag", at)
	}
	f.num, f.wt = tag>>3, uint8(tag&7)
	if f.num == 0 {
		return s.malformed("field number 0", at)
	}
	switch f.wt {
	case wtVarint:
		if f.v, i = pbVarint(b, i, end); i < 0 {
			return s.malformed("truncated varint", at)
		}
	case wtFixed64:
		if end-i < 8 {
			return s.malformed("fixed64 past its message", at)
		}
		f.v = binary.LittleEndian.Uint64(b[i:])
		i += 8
	case wtFixed32:
		if end-i < 4 {
			return s.malformed("fixed32 past its message", at)
		}
		f.v = uint64(binary.LittleEndian.Uint32(b[i:]))
		i += 4
	case wtLen:
		var n uint64
		if n, i = pbVarint(b, i, end); i < 0 {
			return s.malformed("truncated length", at)
		}
		if n > uint64(end-i) {
			return s.malformed("length past its message", at)
		}
		f.vs, f.ve = i, i+int(n)
		i = f.ve
	default:
		return s.malformed("wire type "+string(rune('0'+f.wt)), at)
	}
	return i
}

// malformed records why the body is not a request and returns −1.
func (s *pbScan) malformed(what string, at int) int {
	s.bad = badRecord{what: "malformed protobuf: " + what, at: at}
	return -1
}

// wrongType records a field read with a wire type its message does not give it.
func (s *pbScan) wrongType(at int) bool {
	s.bad = badRecord{what: "malformed protobuf: a field of the wrong wire type", at: at}
	return false
}

// readProto reads an ExportTraceServiceRequest: resource_spans = 1.
func (s *SpanDecoder) readProto(b []byte) bool {
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
			if !s.resourceSpans(b, f.vs, f.ve) {
				return false
			}
		}
	}
	return true
}

// resourceSpans reads a ResourceSpans: resource = 1 first (wherever it is), then scope_spans = 2.
func (s *SpanDecoder) resourceSpans(b []byte, i, end int) bool {
	s.res = [len(s.res)]attrVal{}
	var f pbField
	for j := i; j < end; {
		at := j
		if j = s.pbNext(b, j, end, &f); j < 0 {
			return false
		}
		if f.num == 1 || f.num == 2 {
			if f.wt != wtLen {
				return s.wrongType(at)
			}
			if f.num == 1 && !s.resource(b, f.vs, f.ve) {
				return false
			}
		}
	}
	s.takeRes() // the resource's values are all read: its spans' words (otlp_recent.go)
	ok := true
	for j := i; j < end && ok; {
		j = s.pbNext(b, j, end, &f) // read once already: no error now
		ok = f.num != 2 || s.scopeSpans(b, f.vs, f.ve)
	}
	s.rres.on = false
	return ok
}

// resource reads a Resource: attributes = 1.
func (s *SpanDecoder) resource(b []byte, i, end int) bool {
	var f pbField
	for i < end {
		at := i
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		if f.num == 1 {
			if f.wt != wtLen {
				return s.wrongType(at)
			}
			if !s.keyValue(b, f.vs, f.ve, true, 0) {
				return false
			}
		}
	}
	return true
}

// keyValue reads a KeyValue (key = 1, value = 2) of a resource's attributes (res) or a span's,
// keeping its value when the decoder keeps its key and no earlier attribute gave it (pdata's
// Map.Get finds the first), or of a kvlist at depth, validated only.
func (s *SpanDecoder) keyValue(b []byte, i, end int, res bool, depth int) bool {
	if depth == 0 && s.keyValueFlat(b, i, end, res) {
		return true
	}
	var f pbField
	var key []byte
	v := attrVal{kind: valAbsent}
	for i < end {
		at := i
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		switch f.num {
		case 1, 2:
			if f.wt != wtLen {
				return s.wrongType(at)
			}
			if f.num == 1 {
				key = b[f.vs:f.ve]
				continue
			}
			v = attrVal{kind: valOther} // an empty AnyValue: present, no label
			if !s.anyValue(b, f.vs, f.ve, depth+1, &v) {
				return false
			}
		}
	}
	if depth > 0 {
		return true
	}
	if v.kind == valAbsent {
		v.kind = valOther
	}
	s.keep(key, v, res)
	return true
}

// keyValueFlat is keyValue for what producers write: a key (1) and a value (2), in either
// order (pdata writes the value first), the value one string, integer, boolean or double,
// every tag and length one byte. It reports false, having kept nothing, for any other layout,
// which keyValue then reads.
func (s *SpanDecoder) keyValueFlat(b []byte, i, end int, res bool) bool {
	if end-i < 6 || b[i+1] >= 0x80 {
		return false
	}
	m := i + 2 + int(b[i+1]) // the second field
	if m+2 > end || b[m+1] >= 0x80 || m+2+int(b[m+1]) != end {
		return false
	}
	var ks, ke, vs int
	switch {
	case b[i] == 0x0a && b[m] == 0x12:
		ks, ke, vs = i+2, m, m+2
	case b[i] == 0x12 && b[m] == 0x0a:
		ks, ke, vs, end = m+2, end, i+2, m
	default:
		return false
	}
	if vs+2 > end {
		return false
	}
	// Where the value goes: nil for an attribute the decoder does not keep or an earlier one
	// gave (pdata's Map.Get finds the first); an absent value is the zero attrVal, so that
	// only what the value sets is written.
	var dst *attrVal
	if slot := s.attrSlot(b[ks:ke], res); slot >= 0 {
		if res {
			dst = &s.res[slot]
		} else {
			dst = &s.span.dims[slot-1]
		}
		if dst.kind != valAbsent {
			dst = nil
		}
	}
	switch tag, n := b[vs], b[vs+1]; tag {
	case 0x0a: // string_value
		if n >= 0x80 || vs+2+int(n) != end {
			return false
		}
		if dst != nil {
			dst.kind, dst.b = valString, b[vs+2:end]
		}
	case 0x18, 0x10: // int_value, bool_value
		x, j := uint64(n), vs+2
		switch {
		case n < 0x80:
		case vs+2 < end && b[vs+2] < 0x80: // two bytes, 128 to 16383: a status code
			x, j = uint64(n&0x7f)|uint64(b[vs+2])<<7, vs+3
		default:
			x, j = pbVarint(b, vs+1, end)
		}
		if j != end {
			return false
		}
		if dst != nil {
			dst.kind, dst.i = valInt, int64(x)
			if tag == 0x10 {
				dst.kind, dst.i = valBool, int64(min(x, 1))
			}
		}
	case 0x21: // double_value
		if vs+9 != end {
			return false
		}
		if dst != nil {
			dst.kind, dst.f = valDouble, math.Float64frombits(binary.LittleEndian.Uint64(b[vs+1:]))
		}
	default:
		return false
	}
	return true
}

// keep keeps v as the value of the attribute named name, when the decoder keeps that name
// and no earlier attribute gave it (pdata's Map.Get finds the first).
func (s *SpanDecoder) keep(name []byte, v attrVal, res bool) {
	slot := s.attrSlot(name, res)
	switch {
	case slot < 0:
	case res:
		if s.res[slot].kind == valAbsent {
			s.res[slot] = v
		}
	default:
		if s.span.dims[slot-1].kind == valAbsent {
			s.span.dims[slot-1] = v
		}
	}
}

// anyValueWire is the wire type of AnyValue's field num (string_value = 1, bool_value = 2,
// int_value = 3, double_value = 4, array_value = 5, kvlist_value = 6, bytes_value = 7); ok false
// for a field AnyValue does not have.
func anyValueWire(num uint64) (wt uint8, ok bool) {
	switch num {
	case 2, 3:
		return wtVarint, true
	case 4:
		return wtFixed64, true
	case 1, 5, 6, 7:
		return wtLen, true
	}
	return 0, false
}

// anyValue reads an AnyValue into v: string_value = 1, bool_value = 2, int_value = 3,
// double_value = 4, array_value = 5, kvlist_value = 6, bytes_value = 7 (the last given wins, as
// a oneof's does); arrays and kvlists are validated down to maxAnyDepth.
func (s *SpanDecoder) anyValue(b []byte, i, end, depth int, v *attrVal) bool {
	if depth > maxAnyDepth {
		s.bad = badRecord{what: "AnyValue nested deeper than 32", at: i}
		return false
	}
	var f pbField
	for i < end {
		at := i
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		want, ok := anyValueWire(f.num)
		if !ok {
			*v = attrVal{kind: valOther}
			continue
		}
		if f.wt != want {
			return s.wrongType(at)
		}
		switch f.num {
		case 1:
			*v = attrVal{kind: valString, b: b[f.vs:f.ve]}
		case 2:
			*v = attrVal{kind: valBool}
			if f.v != 0 {
				v.i = 1
			}
		case 3:
			*v = attrVal{kind: valInt, i: int64(f.v)}
		case 4:
			*v = attrVal{kind: valDouble, f: math.Float64frombits(f.v)}
		case 5, 6: // ArrayValue, KeyValueList: values = 1
			*v = attrVal{kind: valOther}
			var g pbField
			for j := f.vs; j < f.ve; {
				at := j
				if j = s.pbNext(b, j, f.ve, &g); j < 0 {
					return false
				}
				if g.num != 1 {
					continue
				}
				if g.wt != wtLen {
					return s.wrongType(at)
				}
				var inner attrVal
				if f.num == 5 && !s.anyValue(b, g.vs, g.ve, depth+1, &inner) ||
					f.num == 6 && !s.keyValue(b, g.vs, g.ve, false, depth) {
					return false
				}
			}
		default:
			*v = attrVal{kind: valOther}
		}
	}
	return true
}

// scopeSpans reads a ScopeSpans: spans = 2.
func (s *SpanDecoder) scopeSpans(b []byte, i, end int) bool {
	var f pbField
	for i < end {
		at := i
		// A span with a one-byte tag and a length of one or two bytes (what a span of pdata's
		// takes: under 128 bytes, or under 16 KiB) is read here; pbNext reads the rest.
		if b[i] == 0x12 && end-i > 3 {
			n, vs := int(b[i+1]), i+2
			if n >= 0x80 && b[i+2] < 0x80 {
				n, vs = n&0x7f|int(b[i+2])<<7, i+3
			}
			if n < 0x80 || vs == i+3 {
				if n <= end-vs {
					if i = vs + n; !s.spanProto(b, at, vs, i) {
						return false
					}
					continue
				}
			}
		}
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		if f.num == 2 {
			if f.wt != wtLen {
				return s.wrongType(at)
			}
			if !s.spanProto(b, at, f.vs, f.ve) {
				return false
			}
		}
	}
	return true
}

// spanProto reads a Span: trace_id = 1, span_id = 2, name = 5, kind = 6,
// start_time_unix_nano = 7, end_time_unix_nano = 8, attributes = 9, status = 15 (code = 3),
// and makes its pending event, whose part is the span's field, b[start:end] (never empty).
func (s *SpanDecoder) spanProto(b []byte, start, i, end int) bool {
	sp := &s.span
	// The span before's values are forgotten by their kind alone (a value is read by its
	// kind): zeroing an attrVal whole, a pointer in it, takes the write barrier's bulk pass
	// while the collector marks.
	sp.name.kind, sp.name.esc, sp.kind, sp.status, sp.start, sp.end = valAbsent, false, 0, 0, 0, 0
	sp.clearIDs()
	for k := range s.dims {
		sp.dims[k].kind, sp.dims[k].esc = valAbsent, false
	}
	var f pbField
	for i < end {
		at := i
		// The fields pdata writes, each with a one-byte tag and (for bytes) a one-byte length
		// that ends within the span, are read here by their tag; pbNext reads the rest.
		switch t := b[i]; t {
		case 0x0a, 0x12, 0x1a, 0x22, 0x2a, 0x4a, 0x5a, 0x6a, 0x7a: // ids, trace_state, name, attributes, events, links, status
			if i+1 >= end {
				break
			}
			n := int(b[i+1])
			if n >= 0x80 || n > end-i-2 {
				break
			}
			vs, ve := i+2, i+2+n
			i = ve
			switch t {
			default: // ids not as pdata writes them (see 0x22); trace_state, events, links skipped
				if t == 0x0a {
					sp.setID(sp.traceID[:], b[vs:ve])
				} else if t == 0x12 {
					sp.setID(sp.spanID[:], b[vs:ve])
				}
			case 0x2a:
				sp.name = attrVal{kind: valString, b: b[vs:ve]}
			case 0x4a:
				if !s.keyValueFlat(b, vs, ve, false) && !s.keyValue(b, vs, ve, false, 0) {
					return false
				}
			case 0x7a: // an empty status, or a code alone of one byte, is read here
				switch {
				case n == 0:
				case n == 2 && b[vs] == 0x18 && b[vs+1] < 0x80:
					sp.status = int64(b[vs+1])
				default:
					if !s.status(b, vs, ve) {
						return false
					}
				}
			case 0x22: // parent_span_id; then span_id and trace_id as pdata writes them, read here
				if end-i >= 28 && b[i] == 0x12 && b[i+1] == 8 && b[i+10] == 0x0a && b[i+11] == 16 {
					sp.spanID, sp.traceID = [8]byte(b[i+2:i+10]), [16]byte(b[i+12:i+28])
					i += 28
				}
			}
			continue
		case 0x39, 0x41: // start_time_unix_nano, end_time_unix_nano
			if end-i < 9 {
				break
			}
			v := binary.LittleEndian.Uint64(b[i+1:])
			i += 9
			if t == 0x39 {
				sp.start = v
			} else {
				sp.end = v
			}
			continue
		case 0x30: // kind
			if i+1 >= end || b[i+1] >= 0x80 {
				break
			}
			sp.kind = int64(b[i+1])
			i += 2
			continue
		}
		if i = s.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		want := uint8(255)
		switch f.num {
		case 1, 2: // an id of another wire type: invalid, not a malformed record
			dst := sp.traceID[:]
			if f.num == 2 {
				dst = sp.spanID[:]
			}
			sp.setWireID(dst, b, f)
			continue
		case 5, 9, 15:
			want = wtLen
		case 6:
			want = wtVarint
		case 7, 8:
			want = wtFixed64
		}
		if want == 255 {
			continue
		}
		if f.wt != want {
			return s.wrongType(at)
		}
		switch f.num {
		case 5:
			sp.name = attrVal{kind: valString, b: b[f.vs:f.ve]}
		case 6:
			sp.kind = int64(int32(f.v)) // an enum is an int32 on the wire
		case 7:
			sp.start = f.v
		case 8:
			sp.end = f.v
		case 9:
			if !s.keyValueFlat(b, f.vs, f.ve, false) && !s.keyValue(b, f.vs, f.ve, false, 0) {
				return false
			}
		case 15:
			if !s.status(b, f.vs, f.ve) {
				return false
			}
		}
	}
	s.spanEvent(b[start:end])
	return true
}

// status reads a Status: code = 3.
func (s *SpanDecoder) status(b []byte, i, end int) bool {
	var g pbField
	for i < end {
		at := i
		if i = s.pbNext(b, i, end, &g); i < 0 {
			return false
		}
		if g.num == 3 {
			if g.wt != wtVarint {
				return s.wrongType(at)
			}
			s.span.status = int64(int32(g.v))
		}
	}
	return true
}
