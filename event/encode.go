package event

import (
	"encoding/hex"
	"math"
	"strconv"

	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/window"
)

// Append appends ev as one JSON line (without the newline) in the form Decoder reads:
//
//	{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5}
//
// with ,"count":n added when Count > 1, and ,"labels":{"name":"value",…} last when Key is a
// series string with labels (window.AppendSeries; window.CheckSeries passes it), its key as
// "key" and its labels in the series string's order (by name), and then, when TraceID is not
// all zero, ,"trace_id":"…" in 32 lowercase hex digits and ,"span_id":"…" in 16 unless SpanID
// is all zero, so that Decode reads back the ids an event has. Strings are escaped as JSON
// requires (invalid UTF-8 becomes \ufffd); the value is the shortest decimal that reads back
// as the same float64.
// A NaN or infinite value is written as the bare token NaN, Infinity or -Infinity, which
// is not JSON: the decoder refuses it as ReasonInvalidValue, as it should.
func Append(dst []byte, ev window.Event) []byte {
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, ev.TS, 10)
	key := ev.Key
	// A key holding 0xFF that is no series string (an old snapshot's) is written whole, as
	// before labels.
	labelled := window.HasLabels(key) && window.CheckSeries(key, math.MaxInt) == nil
	if labelled {
		key = window.SeriesKeyOf(key)
	}
	dst = append(dst, `,"key":`...)
	dst = jsonenc.AppendString(dst, key)
	dst = append(dst, `,"metric":`...)
	dst = jsonenc.AppendString(dst, ev.Metric)
	dst = append(dst, `,"value":`...)
	switch {
	case math.IsNaN(ev.Value):
		dst = append(dst, "NaN"...)
	case math.IsInf(ev.Value, 1):
		dst = append(dst, "Infinity"...)
	case math.IsInf(ev.Value, -1):
		dst = append(dst, "-Infinity"...)
	default:
		dst = strconv.AppendFloat(dst, ev.Value, 'g', -1, 64)
	}
	if ev.Count > 1 {
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendUint(dst, ev.Count, 10)
	}
	if labelled {
		dst = append(dst, `,"labels":{`...)
		first := true
		window.EachLabel(ev.Key, func(name, value string) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = jsonenc.AppendString(dst, name)
			dst = append(dst, ':')
			dst = jsonenc.AppendString(dst, value)
			return true
		})
		dst = append(dst, '}')
	}
	if ev.TraceID != [16]byte{} {
		dst = append(dst, `,"trace_id":"`...)
		dst = hex.AppendEncode(dst, ev.TraceID[:])
		if ev.SpanID != [8]byte{} {
			dst = append(dst, `","span_id":"`...)
			dst = hex.AppendEncode(dst, ev.SpanID[:])
		}
		dst = append(dst, '"')
	}
	return append(dst, '}')
}
