package event

import (
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/jsonenc"
)

// zipkinKindNames are Zipkin's span kinds by OTLP's SPAN_KIND_* (none for unspecified and
// internal, as the Collector's exporter writes them).
var zipkinKindNames = [...]string{2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}

// AppendZipkin appends to dst a list of Zipkin v2 JSON spans (what NewZipkinJSON reads, and
// zipkin-reporter's Kafka sender writes): spans of service, their names lower-cased as
// Zipkin's reporters write them, times in µs, attributes as tags, an error status as the tag
// error=true, an internal kind as the tag span.kind=internal (as the Collector's exporter does), ids from id up (trace id id, span ids id+1 …). slide produce --zipkin writes its
// records with it.
func AppendZipkin(dst []byte, service string, spans []Span, id uint64) []byte {
	dst = append(dst, '[')
	for i := range spans {
		sp := &spans[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"traceId":"`...)
		dst = appendHex16(dst, id)
		dst = append(dst, `","id":"`...)
		dst = appendHex16(dst, id+1+uint64(i))
		dst = append(dst, `","name":`...)
		dst = jsonenc.AppendString(dst, strings.ToLower(sp.Name))
		if sp.Kind >= 0 && sp.Kind < len(zipkinKindNames) && zipkinKindNames[sp.Kind] != "" {
			dst = append(append(append(dst, `,"kind":"`...), zipkinKindNames[sp.Kind]...), '"')
		}
		dst = append(dst, `,"timestamp":`...)
		dst = strconv.AppendInt(dst, sp.Start/1000, 10)
		dst = append(dst, `,"duration":`...)
		dst = strconv.AppendInt(dst, max((sp.End-sp.Start)/1000, 1), 10)
		dst = append(dst, `,"localEndpoint":{"serviceName":`...)
		dst = append(jsonenc.AppendString(dst, service), `},"tags":{`...)
		for j, a := range sp.Attrs {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(jsonenc.AppendString(dst, a.Key), ':')
			if a.Int != nil {
				dst = append(strconv.AppendInt(append(dst, '"'), *a.Int, 10), '"')
			} else {
				dst = jsonenc.AppendString(dst, a.Str)
			}
		}
		sep := len(sp.Attrs) > 0
		if sp.Kind == 1 { // internal: a tag, as the Collector's exporter writes it
			if sep {
				dst = append(dst, ',')
			}
			dst, sep = append(dst, `"span.kind":"internal"`...), true
		}
		if sp.Status == 2 {
			if sep {
				dst = append(dst, ',')
			}
			dst = append(dst, `"error":"true"`...)
		}
		dst = append(dst, "}}"...)
	}
	return append(dst, ']')
}

// appendHex16 appends v as 16 hex digits.
func appendHex16(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for s := 60; s >= 0; s -= 4 {
		b = append(b, digits[v>>uint(s)&15])
	}
	return b
}
