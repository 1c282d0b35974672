package event

import (
	"bytes"
	"strconv"

	"github.com/slide-metrics/slide/window"
)

// OTLP logs (otlp_logs): access logs as the OpenTelemetry Collector ships them, its filelog
// receiver reading the proxy's JSON lines and its kafka exporter writing one
// ExportLogsServiceRequest a record in protobuf (its default encoding, otlp_proto; OTLP/JSON,
// otlp_json, is otlp_logs_json.go). Each
// LogRecord whose body is a string is one JSON line read by a MapDecoder, exactly as the raw
// line would be (the same events, refusals and details); the record's time_unix_nano, else its
// observed_time_unix_nano, else the Kafka record's time, is the default ts the map uses when
// the line has no ts field of its own. A LogRecord whose body is not a string (a kvlist when
// the Collector parsed the line into the body, bytes, none) gives one refused event: it says
// what the body is and what to configure. A LogRecord's trace_id and span_id are the ids
// (window.Event.TraceID, SpanID) of the events its line gives, unless the map's trace field
// gives some (MapTrace); an invalid id (another length, not hex in OTLP/JSON) is no ids,
// never a refusal, and a record's ids are never another's. The wire is scanned as OTLP
// traces are (otlp_proto.go): the request, its ResourceLogs, ScopeLogs and LogRecords read in place,
// every other field (the resource, the scope, attributes, a body that is not a string)
// checked only for its length; a malformed request is refused whole (ReasonBadRecord).
// A refused event's part is its LogRecord's bytes; Where says "log record N", N counting the
// request's LogRecords from 1. Per record: nothing is allocated once the decoder's slices
// and the map's intern table have grown; the per-line cost is the map's.
//
// The field numbers are opentelemetry-proto's (logs/v1/logs.proto,
// collector/logs/v1/logs_service.proto).

// LogsDecoder reads OTLP log requests into events by a Map: a Format. Not safe for concurrent
// use; the zero value is not usable: NewOTLPLogs.
type LogsDecoder struct {
	pbScan
	md      *MapDecoder
	recs    []logRec     // the LogRecords of the last body read
	pending []pendingLog // their events
	body    []byte       // the last body read
	traces  *SpanDecoder // Explain's: is a refused record OTLP traces?
	js      *SpanDecoder // OTLP/JSON (otlp_logs_json.go): its walk; nil for protobuf
	arena   []byte       // OTLP/JSON: the unescaped string bodies of the last body
}

// logRec is one LogRecord as read: its bytes, its body string (line), its default ts (ms)
// and what its body is.
type logRec struct {
	part     []byte
	line     []byte
	ts       int64
	body     uint8
	esc      bool // OTLP/JSON: line is arena[off:end], set once the body is read
	off, end int
	ids      idFields // trace_id, span_id: its events' ids unless the map's trace gives some
}

// What a LogRecord's body is.
const (
	logBodyNone uint8 = iota
	logBodyString
	logBodyKVList
	logBodyBytes
	logBodyArray
	logBodyScalar // a boolean, an integer or a double
)

// pendingLog is one event of a LogRecord (rec, −1 for the body refused whole).
type pendingLog struct {
	rec int
	ev  window.Event
	r   Reason
}

// NewOTLPLogs returns a decoder of OTLP/protobuf logs, each body one ExportLogsServiceRequest,
// whose LogRecords' string bodies are JSON lines of m, or the error of m or cfg.
func NewOTLPLogs(m Map, cfg Config) (*LogsDecoder, error) {
	md, err := NewMapDecoder(m, cfg)
	if err != nil {
		return nil, err
	}
	return &LogsDecoder{md: md}, nil
}

// DecodeLines reads body, one ExportLogsServiceRequest, and calls fn with each event of each
// LogRecord and the record's bytes; a body that is not a request is one call, with the body
// and ReasonBadRecord. defaultTS is the ts of a line that has none when its LogRecord has no
// time either. An empty body is no event (a tombstone). A part DecodeLines handed to fn,
// given back (while fn runs or after, until the next body), decodes to what it did.
func (l *LogsDecoder) DecodeLines(body []byte, defaultTS int64, fn func(part []byte, ev window.Event, r Reason)) int {
	if k := l.recOf(body); k >= 0 {
		n := 0
		for i := range l.pending {
			if p := &l.pending[i]; p.rec == k {
				fn(body, p.ev, p.r)
				n++
			}
		}
		return n
	}
	if len(body) == 0 {
		return 0
	}
	l.read(body, defaultTS)
	for i := range l.pending {
		p := &l.pending[i]
		part := l.body
		if p.rec >= 0 {
			part = l.recs[p.rec].part
		}
		fn(part, p.ev, p.r)
	}
	return len(l.pending)
}

// read reads body into l.recs and l.pending.
func (l *LogsDecoder) read(body []byte, defaultTS int64) {
	l.body, l.bad = body, badRecord{}
	clear(l.recs) // drop the last body's bytes
	l.recs = l.recs[:0]
	clear(l.pending)
	l.pending = l.pending[:0]
	if ok := l.js == nil && l.request(body) || l.js != nil && l.readJSON(body); !ok {
		l.recs = l.recs[:0]
		l.pending = append(l.pending, pendingLog{rec: -1, r: ReasonBadRecord})
		return
	}
	md := l.md
	for k := range l.recs {
		rc := &l.recs[k]
		ts := defaultTS
		if rc.ts != 0 {
			ts = rc.ts
		}
		switch {
		case rc.body == logBodyNone:
			l.pending = append(l.pending, pendingLog{rec: k, r: ReasonMissingField})
		case rc.body != logBodyString:
			l.pending = append(l.pending, pendingLog{rec: k, r: ReasonBadField})
		case !md.scan(rc.line): // as MapDecoder.DecodeLines reads a line
			l.pending = append(l.pending, pendingLog{rec: k, r: ReasonInvalidJSON})
		default:
			trace, span, ok := rc.ids.ids()
			for i := range md.ms {
				ev, r := md.event(rc.line, i, ts)
				if ok && r == ReasonNone && ev.TraceID == [16]byte{} { // the map's trace wins
					ev.TraceID, ev.SpanID = trace, span
				}
				l.pending = append(l.pending, pendingLog{rec: k, ev: ev, r: r})
			}
		}
	}
}

// request reads an ExportLogsServiceRequest: resource_logs = 1.
func (l *LogsDecoder) request(b []byte) bool {
	return l.repeated(b, 0, len(b), 1, l.resourceLogs)
}

// resourceLogs reads a ResourceLogs: scope_logs = 2.
func (l *LogsDecoder) resourceLogs(b []byte, _, i, end int) bool {
	return l.repeated(b, i, end, 2, l.scopeLogs)
}

// scopeLogs reads a ScopeLogs: log_records = 2.
func (l *LogsDecoder) scopeLogs(b []byte, _, i, end int) bool {
	return l.repeated(b, i, end, 2, l.logRecord)
}

// repeated reads the message b[i:end], calling each on every field num (a message, so of wire
// type 2: the field at b[at:], its message b[i:end]) and skipping the others.
func (l *LogsDecoder) repeated(b []byte, i, end int, num uint64, each func(b []byte, at, i, end int) bool) bool {
	var f pbField
	for i < end {
		at := i
		if i = l.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		if f.num == num {
			if f.wt != wtLen {
				return l.wrongType(at)
			}
			if !each(b, at, f.vs, f.ve) {
				return false
			}
		}
	}
	return true
}

// logRecord reads a LogRecord: time_unix_nano = 1, body = 5, trace_id = 9, span_id = 10,
// observed_time_unix_nano = 11. Its part is its field, b[start:end], tag and length included:
// never empty. An id of another length or wire type is invalid: the record's events have no
// ids from it, and it is not refused (pdata would refuse another wire type; an access log's
// latency is good data without its trace).
func (l *LogsDecoder) logRecord(b []byte, start, i, end int) bool {
	rc := logRec{part: b[start:end:end]}
	var t, observed uint64
	var f pbField
	for i < end {
		at := i
		if i = l.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		switch f.num {
		case 1, 11:
			if f.wt != wtFixed64 {
				return l.wrongType(at)
			}
			if f.num == 1 {
				t = f.v
			} else {
				observed = f.v
			}
		case 5:
			if f.wt != wtLen {
				return l.wrongType(at)
			}
			if !l.readBody(b, f.vs, f.ve, &rc) {
				return false
			}
		case 9, 10:
			dst := rc.ids.traceID[:]
			if f.num == 10 {
				dst = rc.ids.spanID[:]
			}
			rc.ids.setWireID(dst, b, f)
		}
	}
	if t == 0 {
		t = observed
	}
	rc.ts = int64(t / 1e6)
	l.recs = append(l.recs, rc)
	return true
}

// readBody reads a LogRecord's body, an AnyValue: string_value = 1, bool_value = 2, int_value = 3,
// double_value = 4, array_value = 5, kvlist_value = 6, bytes_value = 7 (the last given wins,
// as a oneof's does). An array's or a kvlist's contents are not read.
func (l *LogsDecoder) readBody(b []byte, i, end int, rc *logRec) bool {
	rc.body, rc.line = logBodyNone, nil
	var f pbField
	for i < end {
		at := i
		if i = l.pbNext(b, i, end, &f); i < 0 {
			return false
		}
		want, ok := anyValueWire(f.num)
		if !ok {
			continue
		}
		if f.wt != want {
			return l.wrongType(at)
		}
		rc.line = nil
		switch f.num {
		case 1:
			rc.body, rc.line = logBodyString, b[f.vs:f.ve:f.ve]
		case 5:
			rc.body = logBodyArray
		case 6:
			rc.body = logBodyKVList
		case 7:
			rc.body = logBodyBytes
		default:
			rc.body = logBodyScalar
		}
	}
	return true
}

// recOf is the index of the LogRecord of the last body whose bytes part is, or −1.
func (l *LogsDecoder) recOf(part []byte) int {
	if len(part) == 0 {
		return -1
	}
	for k := range l.recs {
		if p := l.recs[k].part; len(p) == len(part) && &p[0] == &part[0] {
			return k
		}
	}
	return -1
}

// Where says where part is in body: "log record N" (from 1, in the request's order) for a
// LogRecord's bytes, "the record" for a body refused whole. A Locator.
func (l *LogsDecoder) Where(body, part []byte) string {
	if k := l.recOf(part); k >= 0 {
		return "log record " + strconv.Itoa(k+1)
	}
	return "the record"
}

// Explain says why part, a LogRecord's bytes DecodeLines handed on or a body, was refused:
// the map's detail for its line (`no field "duration"`), what its body is when not a string,
// or why the body is not a request; "" when it was not refused.
func (l *LogsDecoder) Explain(part []byte) string {
	k := l.recOf(part)
	if k < 0 {
		l.read(part, 0)
		if len(l.pending) == 0 {
			return ""
		}
		if l.pending[0].rec < 0 {
			return l.explainBad(part)
		}
		k = -1
		for i := range l.pending {
			if l.pending[i].r != ReasonNone {
				k = l.pending[i].rec
				break
			}
		}
		if k < 0 {
			return ""
		}
	}
	const fix = ": the filelog receiver's line is the body as it read it; a json_parser operator that parses it keeps the body when it writes to attributes (parse_to: attributes, the default), not to body"
	switch rc := &l.recs[k]; rc.body {
	case logBodyNone:
		return "log record without a body" + fix
	case logBodyKVList:
		return "log record body is a map (kvlist), not the JSON line as a string" + fix
	case logBodyArray:
		return "log record body is an array, not the JSON line as a string" + fix
	case logBodyBytes:
		return "log record body is bytes, not the JSON line as a string: the filelog receiver's encoding: nop writes bytes, its default (utf-8) a string"
	case logBodyScalar:
		return "log record body is a number or a boolean, not the JSON line as a string"
	default:
		if len(bytes.TrimSpace(rc.line)) == 0 { // a blank line is skipped; a log record is refused
			return "log record body is an empty or blank string, not a JSON line"
		}
		return l.md.Explain(rc.line)
	}
}

// explainBad says why part is not a request, with a hint when it is JSON text or OTLP traces.
func (l *LogsDecoder) explainBad(part []byte) string {
	why := l.bad.what + " at byte " + strconv.Itoa(l.bad.at)
	if l.js != nil {
		t := bytes.TrimLeft(part, " \t\r\n")
		switch {
		case len(t) > 0 && t[0] != '{' && t[0] != '[':
			why += " (not JSON text: OTLP/protobuf logs, the kafka exporter's default? --event-format otlp_logs)"
		case bytes.Contains(t, []byte(`"resourceSpans"`)) || bytes.Contains(t, []byte(`"resource_spans"`)):
			why += " (an OTLP/JSON traces request: --event-format otlp_json without --event-map)"
		case len(t) > 0 && t[0] == '{' && !bytes.Contains(t, []byte(`"resourceLogs"`)) && !bytes.Contains(t, []byte(`"resource_logs"`)):
			why += " (a JSON object of another shape: raw JSON lines are read with --event-map alone)"
		}
		return why
	}
	if len(part) > 0 && part[0] == '{' {
		return why + " (the record is JSON text, not protobuf: raw JSON lines are read with --event-map alone; OTLP/JSON logs, the kafka exporter's encoding: otlp_json, are --event-format otlp_logs_json)"
	}
	if l.traces == nil {
		l.traces, _ = NewOTLPProto(SpanConfig{})
	}
	if l.traces.read(part); len(l.traces.pending) > 0 && l.traces.pending[0].r != ReasonBadRecord {
		why += " (the record is OTLP traces, an ExportTraceServiceRequest: --event-format otlp_proto without --event-map)"
	}
	return why
}
