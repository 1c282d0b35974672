package event

import (
	"strings"

	"github.com/slide-metrics/slide/textparse"
)

// OTLP/JSON (opentelemetry-proto's JSON encoding: protobuf's JSON mapping with lowerCamelCase
// names, ids in hex, 64-bit integers as decimal strings, enums as integers) is read by a walk
// over textparse's scanner, never an object tree: the members the events need are entered,
// every other value is validated and skipped by the scanner (SkipValue: JSON to
// textparse.MaxNesting). As pdata's reader does, it also takes the protobuf names
// (resource_spans, start_time_unix_nano), 64-bit integers as JSON numbers, enums by name
// ("SPAN_KIND_SERVER") and null for an absent member. A body that is not JSON, or a member
// the walk reads holding another type (a string for an object, "1.5" for a time), is a bad
// record: ReasonBadRecord for the body whole, as for a malformed protobuf.

// jsonScan is the OTLP/JSON reader's state: a scanner, whose SkipValue skips the members
// the walk does not read, and scopeSpans members met before their resource, read after it.
type jsonScan struct {
	sc       textparse.Scanner // SkipValue
	deferred []int
	name     []byte // the name of the member jObj's fn is called with, unescaped (Zipkin's tags)
}

// The member names the walk reads (jsonField), lowerCamelCase and protobuf's names.
const (
	jResourceSpans = iota
	jResourceSpansPB
	jResource
	jScopeSpans
	jScopeSpansPB
	jSpans
	jAttributes
	jKey
	jValue
	jName
	jKind
	jStart
	jStartPB
	jEnd
	jEndPB
	jStatus
	jCode
	jStringValue
	jStringValuePB
	jBoolValue
	jBoolValuePB
	jIntValue
	jIntValuePB
	jDoubleValue
	jDoubleValuePB
	jArrayValue
	jArrayValuePB
	jKvlistValue
	jKvlistValuePB
	jValues
	jTraceID
	jTraceIDPB
	jSpanID
	jSpanIDPB
	// Zipkin's (zipkin.go)
	jTimestamp
	jDuration
	jLocalEndpoint
	jServiceName
	jTags
	jBinaryAnnotations
	jRemoteEndpoint
	jID
)

// jBad records why the body is not an OTLP/JSON request, the innermost reason first, and
// returns −1.
func (s *SpanDecoder) jBad(what string, at int) int {
	if s.zipkin && strings.HasPrefix(what, "OTLP JSON") {
		what = "Zipkin JSON" + what[len("OTLP JSON"):]
	}
	if s.bad.what == "" {
		s.bad = badRecord{what: what, at: at}
	}
	return -1
}

// jObj walks the object at b[i], calling fn with each member's name (its jsonField, or −1) and the index of its value; fn returns the index after the value. jObj returns the
// index after the object, or −1.
func (s *SpanDecoder) jObj(b []byte, i int, fn func(field, at int) int) int {
	if i >= len(b) || b[i] != '{' {
		return s.jBad("OTLP JSON: not an object", i)
	}
	if i = textparse.SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		field, at := s.jMember(b, i)
		if at < 0 {
			return s.jBad("invalid JSON: not a member", i)
		}
		if i = fn(field, at); i < 0 {
			return -1
		}
		if i = textparse.SkipSpace(b, i); i >= len(b) {
			return s.jBad("invalid JSON: an object without its end", i)
		}
		switch b[i] {
		case ',':
			i = textparse.SkipSpace(b, i+1)
		case '}':
			return i + 1
		default:
			return s.jBad("invalid JSON: no comma or brace after a member", i)
		}
	}
}

// jMember reads the member name at b[i] (its opening quote) and the colon after it: the
// name's jsonField (after unescaping) or −1, and the index of its value, −1 when b[i:]
// is not a name and a colon.
func (s *SpanDecoder) jMember(b []byte, i int) (field, at int) {
	if i >= len(b) || b[i] != '"' {
		return -1, -1
	}
	j, esc := textparse.ScanString(b, i+1)
	if j < 0 {
		return -1, -1
	}
	name := b[i+1 : j]
	if esc {
		name, _ = textparse.Unquote(s.scratch[:0], name)
		s.scratch = name
	}
	if i = textparse.SkipSpace(b, j+1); i >= len(b) || b[i] != ':' {
		return -1, -1
	}
	s.jsc.name = name
	return jsonField(name), textparse.SkipSpace(b, i+1)
}

// jsonField is the member name's j constant, or −1 for a member the walk skips.
func jsonField(name []byte) int {
	switch string(name) {
	case "resourceSpans":
		return jResourceSpans
	case "resource_spans":
		return jResourceSpansPB
	case "resource":
		return jResource
	case "scopeSpans":
		return jScopeSpans
	case "scope_spans":
		return jScopeSpansPB
	case "spans":
		return jSpans
	case "attributes":
		return jAttributes
	case "key":
		return jKey
	case "value":
		return jValue
	case "name":
		return jName
	case "kind":
		return jKind
	case "startTimeUnixNano":
		return jStart
	case "start_time_unix_nano":
		return jStartPB
	case "endTimeUnixNano":
		return jEnd
	case "end_time_unix_nano":
		return jEndPB
	case "status":
		return jStatus
	case "code":
		return jCode
	case "stringValue":
		return jStringValue
	case "string_value":
		return jStringValuePB
	case "boolValue":
		return jBoolValue
	case "bool_value":
		return jBoolValuePB
	case "intValue":
		return jIntValue
	case "int_value":
		return jIntValuePB
	case "doubleValue":
		return jDoubleValue
	case "double_value":
		return jDoubleValuePB
	case "arrayValue":
		return jArrayValue
	case "array_value":
		return jArrayValuePB
	case "kvlistValue":
		return jKvlistValue
	case "kvlist_value":
		return jKvlistValuePB
	case "values":
		return jValues
	case "traceId":
		return jTraceID
	case "trace_id":
		return jTraceIDPB
	case "spanId":
		return jSpanID
	case "span_id":
		return jSpanIDPB
	case "id":
		return jID
	case "timestamp":
		return jTimestamp
	case "duration":
		return jDuration
	case "localEndpoint":
		return jLocalEndpoint
	case "serviceName":
		return jServiceName
	case "tags":
		return jTags
	case "binaryAnnotations":
		return jBinaryAnnotations
	case "remoteEndpoint":
		return jRemoteEndpoint
	}
	return -1
}

// jArr walks the array at b[i] (null is an empty one), calling fn with each element's index;
// fn returns the index after it. jArr returns the index after the array, or −1.
func (s *SpanDecoder) jArr(b []byte, i int, fn func(at int) int) int {
	if j, ok := s.jNull(b, i); ok {
		return j
	}
	if i >= len(b) || b[i] != '[' {
		return s.jBad("OTLP JSON: not an array", i)
	}
	if i = textparse.SkipSpace(b, i+1); i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		if i = fn(i); i < 0 {
			return -1
		}
		if i = textparse.SkipSpace(b, i); i >= len(b) {
			return s.jBad("invalid JSON: an array without its end", i)
		}
		switch b[i] {
		case ',':
			i = textparse.SkipSpace(b, i+1)
		case ']':
			return i + 1
		default:
			return s.jBad("invalid JSON: no comma or bracket after an element", i)
		}
	}
}

// jNull reports a null at b[i] and the index after it.
func (s *SpanDecoder) jNull(b []byte, i int) (int, bool) {
	if i+4 <= len(b) && string(b[i:i+4]) == "null" {
		return i + 4, true
	}
	return i, false
}

// jSkip validates and skips the value at b[i].
func (s *SpanDecoder) jSkip(b []byte, i int) int {
	j := s.jsc.sc.SkipValue(b, i)
	if j < 0 && s.jsc.sc.TooDeep() {
		return s.jBad("JSON objects and arrays nested deeper than 10000 levels", i)
	}
	if j < 0 {
		return s.jBad("invalid JSON", i)
	}
	return j
}

// readJSON reads an ExportTraceServiceRequest.
func (s *SpanDecoder) readJSON(b []byte) bool {
	i := s.jObj(b, textparse.SkipSpace(b, 0), func(field, at int) int {
		if field == jResourceSpans || field == jResourceSpansPB {
			return s.jArr(b, at, func(at int) int { return s.jResourceSpans(b, at) })
		}
		return s.jSkip(b, at)
	})
	if i < 0 {
		return false
	}
	if textparse.SkipSpace(b, i) != len(b) {
		s.jBad("invalid JSON: bytes after the request", i)
		return false
	}
	return true
}

// jResourceSpans reads a ResourceSpans: its resource, then its scopeSpans (those given before
// the resource are read after it).
func (s *SpanDecoder) jResourceSpans(b []byte, i int) int {
	s.res = [len(s.res)]attrVal{}
	seen := false
	base := len(s.jsc.deferred)
	end := s.jObj(b, i, func(field, at int) int {
		switch field {
		case jResource:
			seen = true
			if j, ok := s.jNull(b, at); ok {
				return j
			}
			return s.jObj(b, at, func(field, at int) int {
				if field == jAttributes {
					return s.jArr(b, at, func(at int) int { return s.jKeyValue(b, at, true, 0) })
				}
				return s.jSkip(b, at)
			})
		case jScopeSpans, jScopeSpansPB:
			if seen {
				return s.jArr(b, at, func(at int) int { return s.jScopeSpans(b, at) })
			}
			s.jsc.deferred = append(s.jsc.deferred, at)
		}
		return s.jSkip(b, at)
	})
	if end < 0 {
		return -1
	}
	for k := base; k < len(s.jsc.deferred); k++ {
		if s.jArr(b, s.jsc.deferred[k], func(at int) int { return s.jScopeSpans(b, at) }) < 0 {
			return -1
		}
	}
	s.jsc.deferred = s.jsc.deferred[:base]
	return end
}

// jScopeSpans reads a ScopeSpans: its spans.
func (s *SpanDecoder) jScopeSpans(b []byte, i int) int {
	return s.jObj(b, i, func(field, at int) int {
		if field == jSpans {
			return s.jArr(b, at, func(at int) int { return s.jSpan(b, at) })
		}
		return s.jSkip(b, at)
	})
}

// jSpan reads a Span and makes its pending event, whose part is the span's object. Its ids
// (traceId, spanId: hex) never refuse it: an invalid one leaves its event without ids.
func (s *SpanDecoder) jSpan(b []byte, i int) int {
	sp := &s.span
	sp.name, sp.kind, sp.status, sp.start, sp.end = attrVal{}, 0, 0, 0, 0
	sp.clearIDs()
	for k := range s.dims {
		sp.dims[k] = attrVal{}
	}
	end := s.jObj(b, i, func(field, at int) int {
		if j, ok := s.jNull(b, at); ok {
			return j
		}
		switch field {
		case jName:
			return s.jString(b, at, &sp.name)
		case jTraceID, jTraceIDPB, jSpanID, jSpanIDPB:
			return s.jID(b, at, field)
		case jKind:
			return s.jEnum(b, at, spanKinds[:], &sp.kind)
		case jStart, jStartPB:
			return s.jUint(b, at, &sp.start)
		case jEnd, jEndPB:
			return s.jUint(b, at, &sp.end)
		case jAttributes:
			return s.jArr(b, at, func(at int) int { return s.jKeyValue(b, at, false, 0) })
		case jStatus:
			return s.jObj(b, at, func(field, at int) int {
				if field == jCode {
					if j, ok := s.jNull(b, at); ok {
						return j
					}
					return s.jEnum(b, at, statusCodes[:], &sp.status)
				}
				return s.jSkip(b, at)
			})
		}
		return s.jSkip(b, at)
	})
	if end < 0 {
		return -1
	}
	s.spanEvent(b[i:end])
	return end
}

// jID reads the span's id of member field (jTraceID … jSpanIDPB, Zipkin's jTraceID, jID) at
// b[i]: a string, hex, or any other value (validated and skipped) as an invalid id.
func (s *SpanDecoder) jID(b []byte, i, field int) int {
	var v attrVal
	j := -1
	if i < len(b) && b[i] == '"' {
		j = s.jString(b, i, &v)
	} else {
		j = s.jSkip(b, i)
	}
	if j < 0 {
		return -1
	}
	sp := &s.span
	switch {
	case s.zipkin && field == jTraceID:
		sp.setZipkinID(sp.traceID[:], v)
	case s.zipkin:
		sp.setZipkinID(sp.spanID[:], v)
	case field == jTraceID || field == jTraceIDPB:
		sp.setHexID(sp.traceID[:], v)
	default:
		sp.setHexID(sp.spanID[:], v)
	}
	return j
}

// jKeyValue reads a KeyValue of a resource's attributes (res) or a span's, as keyValue does
// for protobuf, or of a kvlist at depth, validated only.
func (s *SpanDecoder) jKeyValue(b []byte, i int, res bool, depth int) int {
	var key attrVal
	v := attrVal{kind: valOther}
	end := s.jObj(b, i, func(field, at int) int {
		switch field {
		case jKey:
			return s.jString(b, at, &key)
		case jValue:
			if j, ok := s.jNull(b, at); ok {
				return j
			}
			return s.jAnyValue(b, at, depth+1, &v)
		}
		return s.jSkip(b, at)
	})
	if end < 0 || depth > 0 {
		return end
	}
	name := key.b
	if key.esc {
		var lossy bool
		if name, lossy = textparse.Unquote(s.scratch[:0], key.b); lossy {
			return end // not a name the decoder keeps
		}
		s.scratch = name
	}
	s.keep(name, v, res)
	return end
}

// jAnyValue reads an AnyValue into v, arrays and kvlists validated down to maxAnyDepth.
func (s *SpanDecoder) jAnyValue(b []byte, i, depth int, v *attrVal) int {
	if depth > maxAnyDepth {
		return s.jBad("AnyValue nested deeper than 32", i)
	}
	return s.jObj(b, i, func(field, at int) int {
		if j, ok := s.jNull(b, at); ok {
			return j
		}
		switch field {
		case jStringValue, jStringValuePB:
			return s.jString(b, at, v)
		case jBoolValue, jBoolValuePB:
			j := s.jSkip(b, at)
			if j < 0 || b[at] != 't' && b[at] != 'f' {
				return s.jBad("OTLP JSON: boolValue not a boolean", at)
			}
			*v = attrVal{kind: valBool}
			if b[at] == 't' {
				v.i = 1
			}
			return j
		case jIntValue, jIntValuePB:
			t, j := s.jNumber(b, at)
			n, ok := textparse.ParseInt(t)
			if j < 0 || !ok {
				return s.jBad("OTLP JSON: intValue not an int64", at)
			}
			*v = attrVal{kind: valInt, i: n}
			return j
		case jDoubleValue, jDoubleValuePB:
			t, j := s.jNumber(b, at)
			f, err := textparse.ParseFloat(t)
			switch {
			case j < 0:
				return -1
			case string(t) == "NaN" || string(t) == "Infinity" || string(t) == "-Infinity":
				f, err = parseSpecial(t), nil
			}
			if err != nil {
				return s.jBad("OTLP JSON: doubleValue not a double", at)
			}
			*v = attrVal{kind: valDouble, f: f}
			return j
		case jArrayValue, jArrayValuePB, jKvlistValue, jKvlistValuePB:
			*v = attrVal{kind: valOther}
			kv := field == jKvlistValue || field == jKvlistValuePB
			return s.jObj(b, at, func(field, at int) int {
				if field != jValues {
					return s.jSkip(b, at)
				}
				return s.jArr(b, at, func(at int) int {
					if kv {
						return s.jKeyValue(b, at, false, depth)
					}
					var inner attrVal
					return s.jAnyValue(b, at, depth+1, &inner)
				})
			})
		}
		*v = attrVal{kind: valOther}
		return s.jSkip(b, at)
	})
}

// jString reads the string at b[i] into v.
func (s *SpanDecoder) jString(b []byte, i int, v *attrVal) int {
	if i >= len(b) || b[i] != '"' {
		return s.jBad("OTLP JSON: not a string", i)
	}
	j, esc := textparse.ScanString(b, i+1)
	if j < 0 {
		return s.jBad("invalid JSON: a string", i)
	}
	*v = attrVal{kind: valString, b: b[i+1 : j], esc: esc}
	return j + 1
}

// jNumber is the text of the number at b[i], bare or in a string, and the index after it.
func (s *SpanDecoder) jNumber(b []byte, i int) ([]byte, int) {
	if i < len(b) && b[i] == '"' {
		j, esc := textparse.ScanString(b, i+1)
		if j < 0 || esc {
			return nil, s.jBad("OTLP JSON: not a number in a string", i)
		}
		return b[i+1 : j], j + 1
	}
	if i >= len(b) || b[i] != '-' && (b[i] < '0' || b[i] > '9') {
		return nil, s.jBad("OTLP JSON: not a number", i)
	}
	j := s.jSkip(b, i)
	if j < 0 {
		return nil, -1
	}
	return b[i:j], j
}

// jUint reads a uint64 (a time), bare or in a string.
func (s *SpanDecoder) jUint(b []byte, i int, v *uint64) int {
	t, j := s.jNumber(b, i)
	if j < 0 {
		return -1
	}
	n, ok := textparse.ParseUint(t)
	if !ok {
		return s.jBad("OTLP JSON: not a uint64", i)
	}
	*v = n
	return j
}

// jEnum reads an enum: an integer, or a name of names.
func (s *SpanDecoder) jEnum(b []byte, i int, names []string, v *int64) int {
	if i < len(b) && b[i] == '"' {
		var t attrVal
		j := s.jString(b, i, &t)
		if j < 0 {
			return -1
		}
		for k, n := range names {
			if string(t.b) == n {
				*v = int64(k)
				return j
			}
		}
		return s.jBad("OTLP JSON: an enum of an unknown name", i)
	}
	t, j := s.jNumber(b, i)
	n, ok := textparse.ParseInt(t)
	if j < 0 || !ok || n != int64(int32(n)) {
		return s.jBad("OTLP JSON: an enum not an int32", i)
	}
	*v = n
	return j
}
