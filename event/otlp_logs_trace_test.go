package event

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/slide-metrics/slide/window"
)

var (
	recTrace = pcommon.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	recSpan  = pcommon.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}
)

const (
	recTraceHex = "5b8efff798038103d269b633813fc60c"
	recSpanHex  = "eee19b7ec3c1b174"
	lineTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
	lineSpan    = "00f067aa0ba902b7"
)

// withIDs sets a LogRecord's body and its trace and span ids.
func withIDs(line string, trace pcommon.TraceID, span pcommon.SpanID) func(plog.LogRecord) {
	return func(lr plog.LogRecord) {
		lr.Body().SetStr(line)
		lr.SetTraceID(trace)
		lr.SetSpanID(span)
	}
}

// TestOTLPLogsTraceIDs: a LogRecord's trace_id and span_id are the ids of each event its line
// gives, in either encoding, unless the map's trace field gives some; a record without ids
// after one with has none.
func TestOTLPLogsTraceIDs(t *testing.T) {
	m, _ := Preset("envoy")
	for i := range m.Metrics {
		m.Metrics[i].Trace = MapTrace{Field: "traceparent"}
	}
	plain := `{"duration":3,"bytes_sent":10,"upstream_cluster":"c"}`
	traced := `{"duration":3,"bytes_sent":10,"upstream_cluster":"c","traceparent":"00-` + lineTrace + `-` + lineSpan + `-01"}`
	badTrace := `{"duration":3,"bytes_sent":10,"upstream_cluster":"c","traceparent":"-"}`
	recs := []struct {
		set         func(plog.LogRecord)
		trace, span string
	}{
		{withIDs(plain, recTrace, recSpan), recTraceHex, recSpanHex},
		{strBody(plain), "", ""}, // none: not the record's before
		{withIDs(plain, recTrace, pcommon.SpanID{}), recTraceHex, ""},
		{withIDs(traced, recTrace, recSpan), lineTrace, lineSpan}, // the map's trace wins
		{strBody(traced), lineTrace, lineSpan},
		{strBody(plain), "", ""},
		{withIDs(badTrace, recTrace, recSpan), recTraceHex, recSpanHex}, // the map's gives none: the record's
		{withIDs(plain, pcommon.TraceID{}, recSpan), "", ""},            // an all-zero trace id: none
	}
	var sets []func(plog.LogRecord)
	for _, r := range recs {
		sets = append(sets, r.set)
	}
	for _, enc := range logsEncodings {
		body, l := enc.body(t, m, sets...)
		got := decodeFormat(l, body, 0)
		if len(got) != 2*len(recs) {
			t.Fatalf("%s: %d events, want %d", enc.name, len(got), 2*len(recs))
		}
		for i, g := range got {
			want := recs[i/2]
			if tr, sp := idsHex(g.ev); g.r != ReasonNone || tr != want.trace || sp != want.span {
				t.Errorf("%s: record %d event %d: %v, ids %q %q, want %q %q", enc.name, i/2+1, i%2, g.r, tr, sp, want.trace, want.span)
			}
		}
	}
}

// pbLen appends protobuf field num of wire type 2 holding v (lengths under 128).
func pbLen(b []byte, num byte, v []byte) []byte {
	return append(append(b, num<<3|2, byte(len(v))), v...)
}

// logsRequest is an ExportLogsServiceRequest of one LogRecord whose fields are rec.
func logsRequest(rec []byte) []byte {
	return pbLen(nil, 1, pbLen(nil, 2, pbLen(nil, 2, rec)))
}

// Invalid ids (another length, not hex, another wire type or JSON type) are no ids, never a
// refusal, and do not hold over to the next record.
func TestOTLPLogsBadIDs(t *testing.T) {
	m, _ := Preset("envoy")
	line := `{"duration":3,"bytes_sent":10,"upstream_cluster":"c"}`
	body := pbLen(nil, 5, pbLen(nil, 1, []byte(line)))
	good := append(pbLen(pbLen(nil, 9, recTrace[:]), 10, recSpan[:]), body...)
	proto := [][]byte{
		append(pbLen(pbLen(nil, 9, recTrace[:15]), 10, recSpan[:]), body...),               // a trace id of 15 bytes
		append(pbLen(pbLen(nil, 9, recTrace[:]), 10, append(recSpan[:], 0)), body...),      // a span id of 9
		append(append(pbLen(nil, 10, recSpan[:]), 9<<3, 1), append(body, good[:18]...)...), // trace_id a varint, then another trace_id: invalid stays
		body,
	}
	for i, rec := range proto {
		l := mustLogs(NewOTLPLogs(m, Config{}))
		var evs []window.Event
		l.DecodeLines(logsRequest(good), 0, func(_ []byte, ev window.Event, _ Reason) { evs = append(evs, ev) })
		l.DecodeLines(logsRequest(rec), 0, func(_ []byte, ev window.Event, r Reason) {
			if r != ReasonNone {
				t.Errorf("proto %d: refused %v", i, r)
			}
			evs = append(evs, ev)
		})
		if len(evs) != 4 {
			t.Fatalf("proto %d: %d events", i, len(evs))
		}
		if tr, sp := idsHex(evs[0]); tr != recTraceHex || sp != recSpanHex {
			t.Errorf("proto %d: the good record's ids %q %q", i, tr, sp)
		}
		if tr, sp := idsHex(evs[2]); tr != "" || sp != "" {
			t.Errorf("proto %d: ids %q %q, want none", i, tr, sp)
		}
	}
	rec := func(ids string) string {
		return `{"body":{"stringValue":"{\"duration\":3,\"bytes_sent\":10,\"upstream_cluster\":\"c\"}"}` + ids + `}`
	}
	for _, ids := range []string{
		`,"traceId":"` + recTraceHex[2:] + `","spanId":"` + recSpanHex + `"`, // 15 bytes
		`,"traceId":"` + recTraceHex[:31] + `g","spanId":"` + recSpanHex + `"`,
		`,"traceId":"` + recTraceHex + `","spanId":"` + recSpanHex + `0"`,
		`,"trace_id":"` + recTraceHex + `","span_id":7`,
		`,"traceId":{"a":1},"spanId":"` + recSpanHex + `"`,
		`,"traceId":"` + recTraceHex + `","traceId":[]`,
		`,"traceId":null,"spanId":"` + recSpanHex + `"`,
		`,"traceId":"","spanId":"` + recSpanHex + `"`,
		``,
	} {
		good := rec(`,"traceId":"` + recTraceHex + `","spanId":"` + recSpanHex + `"`)
		req := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[` + good + `,` + rec(ids) + `]}]}]}`
		got := decodeFormat(mustLogs(NewOTLPLogsJSON(m, Config{})), []byte(req), 0)
		if len(got) != 4 {
			t.Fatalf("%s: %+v", ids, got)
		}
		for i, g := range got {
			want := ""
			if i < 2 {
				want = recTraceHex
			}
			if tr, _ := idsHex(g.ev); g.r != ReasonNone || tr != want {
				t.Errorf("%s: event %d: %v, trace %q, want %q", ids, i, g.r, tr, want)
			}
		}
	}
}

func mustLogs(l *LogsDecoder, err error) *LogsDecoder {
	if err != nil {
		panic(err)
	}
	return l
}
