package event

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/slide-metrics/slide/window"
)

// A span's event (otlp.go reads its fields): its key and labels checked by the rules of the
// package doc, its series string written in window's encoding and interned, and remembered by
// the parts it was written from.

// spanLabel is one label of a span's event, in the order of their names (the series
// string's): src says where its value comes from.
type spanLabel struct {
	name   string
	src    int    // srcKind, srcStatus, srcName, or dimension i ≥ 0
	prefix []byte // what window.AppendSeries writes before the value: 0xFF name =
}

const (
	srcKind = -3 - iota
	srcStatus
	srcName
)

var (
	spanKindText   = asBytes(spanKinds[:])
	statusCodeText = asBytes(statusCodes[:])
)

func asBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// event makes p, the pending span of span f (p.part set): its event, its key the resource's
// key attribute and its labels in the order of their names, or its refusal. The parts are
// written into p in place (a pending span is too large to copy per span). A span whose parts
// were seen before takes the series they were written to, from its slot of the recent cache
// (otlp_recent.go) or else from seen. Any other span's series string is
// written and looked up: one the decoder has interned was checked when it was added, and the
// string says its key and labels unambiguously when no part held 0xFF (a byte no valid name
// holds) and none was unescaped lossily, so a span of a known series costs no check of its
// parts. Any other span is held to the rules by check, in their order.
func (s *SpanDecoder) event(f *spanFields, p *pendingSpan) {
	if f.end < f.start || uint64(f.kind) >= uint64(len(spanKinds)) || uint64(f.status) >= uint64(len(statusCodes)) || f.miss != whyNone {
		p.ev = window.Event{}
		p.r, p.why = s.check(f)
		return
	}
	key, ok := s.recentKey(f)
	if !ok {
		var r Reason
		if key, r, p.why = s.seenKey(f); r != ReasonNone {
			p.ev = window.Event{}
			p.r = r
			return
		}
		s.remember(key)
	}
	// Every field of the event is written (p.ev holds an earlier body's span): field by
	// field, as a literal would be built on the stack and copied (spanEvent).
	ev := &p.ev
	ev.Metric, ev.Key, ev.Value, ev.Count, ev.TS, ev.Feed = SpanMetric, key, float64(f.end-f.start)/1e6, 1, int64(f.end/1e6), 0
	ev.TraceID, ev.SpanID = [16]byte{}, [8]byte{}
	if !f.badID && f.traceID != [16]byte{} {
		ev.TraceID, ev.SpanID = f.traceID, f.spanID
	}
}

// seenKey is span f's series string by its parts as read, written and interned by series
// when the decoder has not seen them, or why f is refused.
func (s *SpanDecoder) seenKey(f *spanFields) (string, Reason, spanWhy) {
	// The span's parts as read, before any is written as text.
	// (appendRaw's common case, a short string as read, is written inline: a call per part
	// was a tenth of a span's decoding.)
	raw := appendRaw(s.raw[:0], &s.res[0])
	raw = append(raw, byte(f.kind), byte(f.status))
	for i := -1; i < len(s.dims); i++ {
		v := &f.name
		if i >= 0 {
			if v = &f.dims[i]; v.kind == valAbsent {
				v = &s.res[1+i]
			}
		}
		if v.kind == valString && !v.esc && len(v.b) < 0x80 {
			raw = append(append(raw, valString<<1, byte(len(v.b))), v.b...)
			continue
		}
		raw = appendRaw(raw, v)
	}
	s.raw = raw
	key, ok := s.seen[string(raw)]
	if !ok {
		var r Reason
		var w spanWhy
		if key, r, w = s.series(f); r != ReasonNone {
			return "", r, w
		}
		if len(s.seen) >= s.d.maxInterned {
			clear(s.seen)
			*s.recent = [len(s.recent)]recentSlot{}
		}
		s.seen[string(raw)] = key
	}
	return key, ReasonNone, spanWhy{}
}

// appendRaw appends v as read, unambiguously: its type, then its bytes with their length or
// its number.
func appendRaw(raw []byte, v *attrVal) []byte {
	t := v.kind << 1
	if v.esc {
		t |= 1
	}
	switch v.kind {
	case valString:
		if len(v.b) < 0x80 { // its length is its one-byte varint
			return append(append(raw, t, byte(len(v.b))), v.b...)
		}
		raw = binary.AppendUvarint(append(raw, t), uint64(len(v.b)))
		return append(raw, v.b...)
	case valInt, valBool:
		return binary.LittleEndian.AppendUint64(append(raw, t), uint64(v.i))
	case valDouble:
		return binary.LittleEndian.AppendUint64(append(raw, t), math.Float64bits(v.f))
	}
	return append(raw, t)
}

// series is the series string of span f, interned, or why f is refused.
func (s *SpanDecoder) series(f *spanFields) (string, Reason, spanWhy) {
	d := s.d
	kt := s.text(&s.res[0])
	ser := append(s.ser[:0], kt...)
	lossy := s.lossy || s.res[0].kind == valString && bytes.IndexByte(kt, window.LabelSep) >= 0
	if len(ser) == 0 || len(ser) > d.maxKey {
		r, w := s.check(f)
		return "", r, w
	}
	for _, l := range s.order {
		var t []byte
		switch l.src {
		case srcKind:
			t = spanKindText[f.kind]
		case srcStatus:
			t = statusCodeText[f.status]
		case srcName:
			t = s.text(&f.name)
			lossy = lossy || s.lossy || bytes.IndexByte(t, window.LabelSep) >= 0
		default:
			v := &f.dims[l.src]
			if v.kind == valAbsent {
				v = &s.res[1+l.src]
			}
			t = s.text(v)
			lossy = lossy || s.lossy || v.kind == valString && bytes.IndexByte(t, window.LabelSep) >= 0
		}
		if len(t) > 0 {
			ser = append(append(ser, l.prefix...), t...)
		}
	}
	s.ser = ser
	key, h, ok := "", uint64(0), false
	if !lossy { // lossy: unescaped lossily, or a part holding 0xFF
		key, h, ok = d.intern.lookup(ser)
	}
	if !ok {
		if r, w := s.check(f); r != ReasonNone {
			return "", r, w
		}
		_, h, _ = d.intern.lookup(ser) // not looked up when a part held 0xFF, which check refused
		key = d.intern.add(ser, h)
	}
	return key, ReasonNone, spanWhy{}
}

// check holds span f to the rules, in their order: its key (the resource's key attribute),
// its times, kind and status, then its labels (span_name, then the dimensions in the config's
// order), each value by checkLabelValue.
func (s *SpanDecoder) check(f *spanFields) (Reason, spanWhy) {
	kv := s.text(&s.res[0])
	switch r := s.d.nameLen(len(kv)); {
	case s.lossy:
		return ReasonBadField, spanWhy{what: whyKeyBad}
	case r == ReasonMissingField:
		return r, spanWhy{what: whyNoKey}
	case r == ReasonKeyTooLong:
		return r, spanWhy{what: whyKeyTooLong, n: len(kv)}
	case !window.ValidNameBytes(kv):
		return ReasonBadField, spanWhy{what: whyKeyBad}
	}
	switch {
	case f.miss == whyTimeRange:
		return ReasonInvalidValue, spanWhy{what: f.miss}
	case f.miss != whyNone:
		return ReasonMissingField, spanWhy{what: f.miss}
	case f.end < f.start:
		return ReasonInvalidValue, spanWhy{what: whyEndBeforeStart, n: int(min(f.start-f.end, math.MaxInt64))}
	case uint64(f.kind) >= uint64(len(spanKinds)):
		return ReasonBadField, spanWhy{what: whyKind, n: int(f.kind)}
	case uint64(f.status) >= uint64(len(statusCodes)):
		return ReasonBadField, spanWhy{what: whyStatus, n: int(f.status)}
	}
	if r, w := s.checkLabel(-1, &f.name); r != ReasonNone {
		return r, w
	}
	for i := range s.dims {
		v := &f.dims[i]
		if v.kind == valAbsent {
			v = &s.res[1+i]
		}
		if r, w := s.checkLabel(int8(i), v); r != ReasonNone {
			return r, w
		}
	}
	return ReasonNone, spanWhy{}
}

// checkLabel holds the value v of a label (span_name for −1, else dimension dim) to the rule
// of a label's value.
func (s *SpanDecoder) checkLabel(name int8, v *attrVal) (Reason, spanWhy) {
	t := s.text(v)
	if s.lossy {
		return ReasonBadField, spanWhy{what: whyValueBad, about: name}
	}
	switch r, why := checkLabelValue(t); why {
	case labelTooLong:
		return r, spanWhy{what: whyValueTooLong, about: name, n: len(t)}
	case labelBadValue:
		return r, spanWhy{what: whyValueBad, about: name}
	}
	return ReasonNone, spanWhy{}
}
