package event

import (
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// An event's trace_id and span_id members give it its TraceID and SpanID (exemplars); an id
// that is not one gives it no ids and never refuses it.

// TestDecodeTraceIDs: each way of writing the ids, and each way of getting them wrong, on
// every path (the event first in Append's layout, then spaced, then among members only the
// scanner path takes).
func TestDecodeTraceIDs(t *testing.T) {
	trace := [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	span := [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	trace64 := [16]byte{8: 0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6}
	const tr, sp = `"4bf92f3577b34da6a3ce929d0e0e4736"`, `"00f067aa0ba902b7"`
	for _, c := range []struct {
		members string // after the value
		trace   [16]byte
		span    [8]byte
		r       Reason
	}{
		{`"trace_id":` + tr + `,"span_id":` + sp, trace, span, ReasonNone},
		{`"span_id":` + sp + `,"trace_id":` + tr, trace, span, ReasonNone},
		{`"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736","span_id":"00F067AA0BA902B7"`, trace, span, ReasonNone}, // upper case
		{`"trace_id":"4bF92f3577B34da6a3ce929d0e0e4736"`, trace, [8]byte{}, ReasonNone},                         // mixed, no span id
		{`"trace_id":"4bf92f3577b34da6","span_id":` + sp, trace64, span, ReasonNone},                            // 64 bits, right-aligned
		{`"trace_id":"\u0034bf92f3577b34da6a3ce929d0e0e473\u0036","span_id":` + sp, trace, span, ReasonNone},    // escaped, as encoding/json reads it
		{`"tr\u0061ce_id":` + tr, trace, [8]byte{}, ReasonNone},                                                 // an escaped name
		{`"trace_id":` + tr + `,"span_id":null`, trace, [8]byte{}, ReasonNone},
		{`"trace_id":` + tr + `,"span_id":""`, trace, [8]byte{}, ReasonNone},
		// No ids, and the event kept.
		{`"span_id":` + sp, [16]byte{}, [8]byte{}, ReasonNone}, // a span without its trace
		{`"trace_id":null,"span_id":` + sp, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":""`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":"00000000000000000000000000000000","span_id":` + sp, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":"0000000000000000"`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":"4bf92f3577b34da6a3ce929d0e0e473"`, [16]byte{}, [8]byte{}, ReasonNone},   // 31 digits
		{`"trace_id":"4bf92f3577b34da6a3ce929d0e0e47360"`, [16]byte{}, [8]byte{}, ReasonNone}, // 33
		{`"trace_id":"4bf92f3577b34da"`, [16]byte{}, [8]byte{}, ReasonNone},                   // 15
		{`"trace_id":"4bf92f3577b34da6a3ce929d0e0e473g"`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`, [16]byte{}, [8]byte{}, ReasonNone}, // a traceparent is --event-map's
		{`"trace_id":7`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":["4bf92f3577b34da6a3ce929d0e0e4736"]`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":` + tr + `,"span_id":"0000000000000000"`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":` + tr + `,"span_id":"00f067aa0ba902b"`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":` + tr + `,"span_id":"00f067aa0ba902b7a3"`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":` + tr + `,"span_id":12345`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":` + tr + `,"span_id":{}`, [16]byte{}, [8]byte{}, ReasonNone},
		{`"trace_id":"\ud800bf92f3577b34da6a3ce929d0e0e4736"`, [16]byte{}, [8]byte{}, ReasonNone}, // lossy
		// Given twice: refused, as every known field is.
		{`"trace_id":` + tr + `,"trace_id":` + tr, [16]byte{}, [8]byte{}, ReasonBadField},
		{`"span_id":` + sp + `,"trace_id":` + tr + `,"span_id":null`, [16]byte{}, [8]byte{}, ReasonBadField},
		{`"trace_id":` + tr + `,"tr\u0061ce_id":7`, [16]byte{}, [8]byte{}, ReasonBadField},
	} {
		for k, line := range []string{
			`{"ts":1700000000123,"key":"tenant-42","metric":"latency_ms","value":27.431,` + c.members + `}`,
			`{ "key": "tenant-42", "metric": "latency_ms", "value": 27.431, ` + c.members + ` }`,
			// a count past int64, which the fast paths leave to the scanner path
			`{"key":"tenant-42","count":18446744073709551615,"metric":"latency_ms","value":27.431,` + c.members + `}`,
		} {
			d := newTestDecoder(t)
			checkAgainstRef(t, d, []byte(line))
			if p := checkFastPaths(t, []byte(line), nil); k == 2 && p != "" {
				t.Errorf("%s: taken by the %s path, want the scanner path", line, p)
			}
			ev, r := d.Decode([]byte(line), defTS)
			if r != c.r || ev.TraceID != c.trace || ev.SpanID != c.span {
				t.Errorf("%s: %v, ids %x %x; want %v, %x %x", line, r, ev.TraceID, ev.SpanID, c.r, c.trace, c.span)
			}
			if r == ReasonNone && (ev.Key != "tenant-42" || ev.Metric != "latency_ms" || ev.Value != 27.431 || ev.Count == 0) {
				t.Errorf("%s: event %+v", line, ev)
			}
		}
	}
	d := newTestDecoder(t)
	line := []byte(`{"key":"a","metric":"m","value":1,"span_id":"00f067aa0ba902b7","span_id":"00f067aa0ba902b7"}`)
	if got, want := d.Explain(line), `field "span_id": given twice (a field appears at most once)`; got != want {
		t.Errorf("Explain(%s) = %q, want %q", line, got, want)
	}
}

// TestDecodeTraceIDsPaths: a line of Append's layout with ids is read by the exact path's
// hand-off to the member loop, not by the scanner path, and its ids survive Append.
func TestDecodeTraceIDsPaths(t *testing.T) {
	ev := window.Event{TS: 1700000000123, Key: "tenant-42", Metric: "latency_ms", Value: 27.431, Count: 1,
		TraceID: [16]byte{0: 0x4b, 15: 0x36}, SpanID: [8]byte{1: 0xf0, 7: 0xb7}}
	line := Append(nil, ev)
	if p := checkFastPaths(t, line, nil); p != "exact" {
		t.Errorf("%s: taken by %q, want the exact path", line, p)
	}
	d := newTestDecoder(t)
	if got, r := d.Decode(line, 0); r != ReasonNone || got != ev {
		t.Errorf("%s: %+v %v, want %+v", line, got, r, ev)
	}
}

// refIDs is the ids' rule by encoding/json and encoding/hex: trace_id a string of 32 or 16
// hex digits (16 are the id's last 8 bytes), not all zero; span_id absent, null, "" or 16 hex
// digits not all zero; anything else in either, no ids.
func refIDs(m map[string]json.RawMessage) (trace [16]byte, span [8]byte) {
	text := func(name string) (string, bool) {
		raw, ok := m[name]
		if !ok || string(raw) == "null" {
			return "", true
		}
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	}
	t, ok := text("trace_id")
	if !ok || t == "" {
		return
	}
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != 16 && len(b) != 8 {
		return
	}
	var tid [16]byte
	copy(tid[16-len(b):], b)
	s, ok := text("span_id")
	if tid == [16]byte{} || !ok {
		return
	}
	var sid [8]byte
	if s != "" {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != 8 {
			return
		}
		copy(sid[:], b)
		if sid == [8]byte{} {
			return
		}
	}
	return tid, sid
}

// randHex is n random hex digits, in lower, upper or mixed case.
func randHex(rng *rand.Rand, n int) string {
	const lower, upper = "0123456789abcdef", "0123456789ABCDEF"
	mode := rng.IntN(3)
	var b strings.Builder
	for range n {
		k := rng.IntN(16)
		if mode == 1 || mode == 2 && rng.IntN(2) == 0 {
			b.WriteByte(upper[k])
		} else {
			b.WriteByte(lower[k])
		}
	}
	return b.String()
}

// idValue is an id member's value near an id of n hex digits: one, the other length, zeros,
// a digit more or less, a byte that is not hex, escaped digits, "", null and other types.
func idValue(rng *rand.Rand, n int) string {
	id := randHex(rng, n)
	switch rng.IntN(12) {
	case 0:
		return `"` + strings.Repeat("0", n) + `"`
	case 1:
		return `"` + id[1:] + `"`
	case 2:
		return `"` + id + randHex(rng, 1) + `"`
	case 3:
		k := rng.IntN(n)
		return `"` + id[:k] + string("g-xZ "[rng.IntN(5)]) + id[k+1:] + `"`
	case 4:
		return `"\u00` + hex.EncodeToString([]byte{id[0]}) + id[1:] + `"`
	case 5:
		return []string{`""`, "null", "7", "true", "[]", `{"a":1}`, `"\ud800"`, `"` + randHex(rng, 48-n) + `"`}[rng.IntN(8)]
	}
	return `"` + id + `"`
}
