package event

import (
	"bytes"
	"math"

	"github.com/slide-metrics/slide/textparse"
)

// Zipkin's JSON v2 (zipkin_json): a record is a list of spans, as zipkin-reporter's Kafka
// sender and the Collector's kafka exporter (encoding zipkin_json) write them (one span not
// in a list is refused, see readZipkin).
// Each span is one event, the one the same span makes through the Collector's zipkin receiver
// (contrib's zipkinv2 translator) and otlp_proto:
//   - key: localEndpoint.serviceName, the Collector's service.name (a service.name tag
//     overrides it, as there; a span without serviceName has no key); --span-key another
//     attribute names a tag;
//   - span_name: name, as written (Zipkin's reporters write it lower-cased);
//   - span_kind: CLIENT, SERVER, PRODUCER, CONSUMER as SPAN_KIND_*; any other or none is
//     SPAN_KIND_UNSPECIFIED, or SPAN_KIND_INTERNAL with the tag span.kind=internal;
//   - status_code: the tag otel.status_code (STATUS_CODE_OK or Ok, …), and STATUS_CODE_ERROR
//     for any span with an error tag (Zipkin's mark of a failed span, whatever its value);
//   - dimensions: tags of those names (a tag given twice: its last value, as a JSON map's);
//     as the receiver names them, the tag http.status_code is also http.response.status_code
//     (unless that tag is given) and remoteEndpoint.serviceName is service.peer.name;
//   - value: duration (µs) in fractional milliseconds; ts: the end, timestamp + duration;
//   - ids: traceId (hex: a 64-bit id is the last 8 bytes of TraceID) and id, read as the
//     receiver reads them; an invalid one leaves the event without ids, the span kept.
//
// Tags hold strings; a number or boolean is taken as its text, an object or array gives no
// label. A span without a timestamp or a duration (0 is none, as Zipkin's reporters write it)
// is refused, missing_field: it is unfinished, or the half of a shared span that its other
// half measures (the Collector would make it 0 ms at 1970). Zipkin's v1 JSON (with
// binaryAnnotations) is refused whole, as is any body that is not JSON.

// NewZipkinJSON returns a decoder of Zipkin's JSON v2: each body a list of spans (zipkin_json).
func NewZipkinJSON(cfg SpanConfig) (*SpanDecoder, error) {
	s, err := newSpanDecoder(cfg, true)
	if s != nil {
		s.zipkin = true
		s.zCode, s.zPeer = s.attrSlot([]byte(attrHTTPCode), false), s.attrSlot([]byte(attrPeer), false)
	}
	return s, err
}

// The attributes the Collector's zipkin receiver makes of a tag and an endpoint (semconv v1,
// its feature gates' defaults): the tag http.status_code is http.response.status_code there,
// and remoteEndpoint.serviceName is service.peer.name.
const (
	attrHTTPCode = "http.response.status_code"
	attrPeer     = "service.peer.name"
)

// noServiceName is the service the Collector's zipkin exporter names a resource without
// service.name, and its receiver reads as none.
const noServiceName = "OTLPResourceNoServiceName"

// readZipkin reads a list of Zipkin spans (one span not in a list is refused, as Zipkin's
// collector and the Collector's receiver refuse it).
func (s *SpanDecoder) readZipkin(b []byte) bool {
	i := s.jArr(b, textparse.SkipSpace(b, 0), func(at int) int { return s.zSpan(b, at) })
	if i < 0 {
		return false
	}
	if textparse.SkipSpace(b, i) != len(b) {
		s.jBad("invalid JSON: bytes after the spans", i)
		return false
	}
	return true
}

// Zipkin's span kinds, by their index in spanKinds.
var zipkinKinds = [...]struct {
	name string
	kind int64
}{{"SERVER", 2}, {"CLIENT", 3}, {"PRODUCER", 4}, {"CONSUMER", 5}}

// The values of the tag otel.status_code the Collector's zipkin receiver reads, by code.
var zipkinStatus = [...]string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR", "Unset", "Ok", "Error"}

// zFields is what a Zipkin span's event is made of besides s.span's name and s.res's
// tags, as either encoding reads it.
type zFields struct {
	svc, peer, kind, status, kindTag attrVal // kind: JSON's name; proto's enum is kindNum
	kindNum                          int64   // proto3's Kind (1 CLIENT … 4 CONSUMER), or 0
	ts, dur                          uint64  // µs
	errTag, codeTag                  bool
}

// zBegin clears the decoder's span and tags for the next Zipkin span.
func (s *SpanDecoder) zBegin() {
	sp := &s.span
	sp.name, sp.kind, sp.status, sp.start, sp.end, sp.miss = attrVal{}, 0, 0, 0, 0, whyNone
	sp.clearIDs()
	for k := range s.dims {
		sp.dims[k] = attrVal{} // a tag is kept as a resource attribute: a span has no other
	}
	s.res = [len(s.res)]attrVal{}
}

// zKeep keeps the tag name = v of z's span: the tags the receiver reads besides keeping
// them, and a dimension or key of that name.
func (s *SpanDecoder) zKeep(z *zFields, name []byte, v attrVal) {
	switch string(name) {
	case "error":
		z.errTag = true
	case "otel.status_code":
		z.status = v
	case "span.kind":
		z.kindTag = v
	case attrHTTPCode:
		z.codeTag = true
	case "http.status_code": // the receiver's http.response.status_code, unless given
		if s.zCode >= 0 && !z.codeTag {
			s.res[s.zCode] = v
		}
	}
	if slot := s.attrSlot(name, true); slot >= 0 {
		s.res[slot] = v // the last of a name, as a map keeps
	}
}

// zSpan reads a JSON span and makes its pending event, whose part is the span's object.
func (s *SpanDecoder) zSpan(b []byte, i int) int {
	s.zBegin()
	var z zFields
	end := s.jObj(b, i, func(field, at int) int {
		if j, ok := s.jNull(b, at); ok {
			return j
		}
		switch field {
		case jName:
			return s.jString(b, at, &s.span.name)
		case jTraceID, jID: // hex; an invalid id leaves the event without ids
			return s.jID(b, at, field)
		case jKind:
			return s.jString(b, at, &z.kind)
		case jTimestamp:
			return s.jUint(b, at, &z.ts)
		case jDuration:
			return s.jUint(b, at, &z.dur)
		case jLocalEndpoint:
			return s.zEndpoint(b, at, &z.svc)
		case jRemoteEndpoint:
			return s.zEndpoint(b, at, &z.peer)
		case jTags:
			return s.jObj(b, at, func(_, at int) int {
				name := s.jsc.name
				var v attrVal
				j := s.zTag(b, at, &v)
				if j >= 0 {
					s.zKeep(&z, name, v)
				}
				return j
			})
		case jBinaryAnnotations:
			return s.jBad("Zipkin v1 JSON (binaryAnnotations): zipkin_json reads Zipkin's v2 spans", at)
		}
		return s.jSkip(b, at)
	})
	if end < 0 {
		return -1
	}
	s.zFinish(&z, b[i:end])
	return end
}

// zFinish makes the pending event of the span read into s and z, whose bytes are part.
func (s *SpanDecoder) zFinish(z *zFields, part []byte) {
	sp := &s.span
	if s.keyAttr == DefaultSpanKey {
		switch {
		case z.svc.kind != valString || len(z.svc.b) == 0 || string(z.svc.b) == noServiceName:
			s.res[0] = attrVal{} // no service: the Collector keeps no resource, not even a tag's
		case s.res[0].kind == valAbsent:
			s.res[0] = z.svc
		}
	}
	if s.zPeer >= 0 && z.peer.kind == valString && len(z.peer.b) > 0 {
		s.res[s.zPeer] = z.peer // the endpoint's, over a tag of the name, as the receiver writes it
	}
	sp.kind = zipkinKind(z)
	if z.status.kind == valString && !z.status.esc {
		for k, n := range zipkinStatus {
			if string(z.status.b) == n {
				sp.status = int64(k % 3)
			}
		}
	}
	if z.errTag {
		sp.status = 2
	}
	switch ts, dur := z.ts, z.dur; {
	case ts == 0:
		sp.miss = whyNoTimestamp
	case dur == 0:
		sp.miss = whyNoDuration
	case ts > math.MaxInt64/1000 || dur > math.MaxInt64/1000-ts:
		sp.miss = whyTimeRange
	default:
		sp.start, sp.end = ts*1000, (ts+dur)*1000
	}
	s.spanEvent(part)
}

// zEndpoint reads an endpoint's serviceName into v.
func (s *SpanDecoder) zEndpoint(b []byte, i int, v *attrVal) int {
	return s.jObj(b, i, func(field, at int) int {
		if field != jServiceName {
			return s.jSkip(b, at)
		}
		if j, ok := s.jNull(b, at); ok {
			return j
		}
		return s.jString(b, at, v)
	})
}

// zipkinKind is the OTLP span kind of z's kind (JSON's name or proto3's enum), or of the tag
// span.kind without one.
func zipkinKind(z *zFields) int64 {
	if z.kind.kind == valString && !z.kind.esc {
		for _, k := range zipkinKinds {
			if string(z.kind.b) == k.name {
				return k.kind
			}
		}
	}
	if z.kindNum >= 1 && z.kindNum <= 4 {
		return [...]int64{3, 2, 4, 5}[z.kindNum-1] // CLIENT, SERVER, PRODUCER, CONSUMER
	}
	if z.kindTag.kind == valString && !z.kindTag.esc && string(z.kindTag.b) == "internal" {
		return 1
	}
	return 0
}

// zTag reads a tag's value: a string; a number or boolean as its text; anything else
// validated and skipped (no label).
func (s *SpanDecoder) zTag(b []byte, i int, v *attrVal) int {
	if i < len(b) && b[i] == '"' {
		return s.jString(b, i, v)
	}
	j := s.jSkip(b, i)
	if j >= 0 && (b[i] == '-' || b[i] >= '0' && b[i] <= '9' || b[i] == 't' || b[i] == 'f') {
		*v = attrVal{kind: valString, b: b[i:j]}
	} else {
		*v = attrVal{kind: valOther}
	}
	return j
}

// otherJSON is a hint for a body refused whole that is the other JSON span format's.
func (s *SpanDecoder) otherJSON(body []byte) string {
	if !s.json {
		return ""
	}
	t := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case s.zipkin && len(t) > 0 && t[0] == '{' && (bytes.Contains(t, []byte(`"resourceSpans"`)) || bytes.Contains(t, []byte(`"resource_spans"`))):
		return " (an OTLP/JSON request: --event-format otlp_json)"
	case !s.zipkin && len(t) > 0 && t[0] == '[':
		return " (a JSON list: Zipkin's spans? --event-format zipkin_json)"
	}
	return ""
}
