package event

import (
	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// A map's trace (MapTrace) is read after the rest of a metric's event, from the fields the
// line's walk recorded, into arrays on the stack: nothing allocated, and nothing refused.

// traceIDs sets ev's TraceID and SpanID from metric m's trace fields by MapTrace's rules, or
// leaves them zero.
func (md *MapDecoder) traceIDs(line []byte, m *mapMetric, ev *window.Event) {
	t, ok := md.idText(line, md.vals[m.trace])
	if !ok {
		return
	}
	var trace [16]byte
	var span [8]byte
	switch len(t) {
	case 32, 16: // 128 bits, or 64 right-aligned into the last 8 bytes
		ok = hexID(trace[:], t)
	default:
		ok = traceparent(t, &trace, &span)
	}
	if !ok || trace == [16]byte{} {
		return
	}
	if m.span >= 0 {
		if s, ok := md.idText(line, md.vals[m.span]); ok && len(s) == 16 { // (t is read: the scratch may be reused)
			var id [8]byte
			if hexID(id[:], s) && id != [8]byte{} {
				span = id
			}
		}
	}
	ev.TraceID, ev.SpanID = trace, span
}

// idText is the text of v, a string in line (unescaped into the decoder's scratch when it has
// escapes), or false when v is not a string.
func (md *MapDecoder) idText(line []byte, v textparse.Value) ([]byte, bool) {
	if v.Kind != textparse.String {
		return nil, false
	}
	s := v.Bytes(line)
	if !v.Escaped {
		return s, true
	}
	s, lossy := md.d.unquote(s)
	return s, !lossy
}

// traceparent reads t, a W3C traceparent header's value, version-traceid-parentid-flags in
// hex of either case ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), into trace
// and span. Version 00 is exactly 55 bytes; a later version (not ff) may go on after a '-',
// which is not read. A parent (span) id of zeros makes the header invalid, as the
// recommendation says; an all-zero trace id is left to the caller.
func traceparent(t []byte, trace *[16]byte, span *[8]byte) bool {
	if len(t) < 55 || t[2] != '-' || t[35] != '-' || t[52] != '-' {
		return false
	}
	var version, flags [1]byte
	switch {
	case !hexID(version[:], t[:2]) || version[0] == 0xff:
		return false
	case len(t) > 55 && (version[0] == 0 || t[55] != '-'):
		return false
	}
	return hexID(trace[:], t[3:35]) && hexID(span[:], t[36:52]) && hexID(flags[:], t[53:55]) && *span != [8]byte{}
}
