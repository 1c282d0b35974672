package event

import (
	"github.com/slide-metrics/slide/textparse"
)

// OTLP/JSON logs (otlp_logs_json): the kafka exporter's encoding: otlp_json. The request is
// walked by the OTLP/JSON trace reader's helpers (otlp_json.go: jObj, jArr, jSkip, jUint, on a
// SpanDecoder of its own), by the same rules: lowerCamelCase or protobuf's names, times as
// decimal strings or numbers, null for an absent member, every other member validated and
// skipped, a body that is not JSON or not of a request's shape a bad record. A LogRecord's
// part is its object; its string body, unescaped, is the line the map reads, kept in the
// decoder's arena (grown once, reused).

// NewOTLPLogsJSON returns a decoder of OTLP/JSON logs, each body one ExportLogsServiceRequest
// in OTLP's JSON encoding, whose LogRecords' string bodies are JSON lines of m.
func NewOTLPLogsJSON(m Map, cfg Config) (*LogsDecoder, error) {
	l, err := NewOTLPLogs(m, cfg)
	if err != nil {
		return nil, err
	}
	if l.js, err = NewOTLPJSON(SpanConfig{}); err != nil {
		return nil, err
	}
	return l, nil
}

// readJSON reads an ExportLogsServiceRequest in OTLP/JSON into l.recs, or reports why not
// in l.bad.
func (l *LogsDecoder) readJSON(b []byte) bool {
	j := l.js
	j.bad, l.arena = badRecord{}, l.arena[:0]
	seen := false
	i := j.jObj(b, textparse.SkipSpace(b, 0), func(_, at int) int {
		if name := string(j.jsc.name); name == "resourceLogs" || name == "resource_logs" {
			seen = true
			return j.jArr(b, at, func(at int) int { return l.jMessages(b, at, "scopeLogs", "scope_logs", l.jScopeLogs) })
		}
		return j.jSkip(b, at)
	})
	switch {
	case i >= 0 && textparse.SkipSpace(b, i) != len(b):
		i = j.jBad("invalid JSON: bytes after the request", i)
	case i >= 0 && !seen: // another JSON object (a raw line, spans) would be no event without a word
		i = j.jBad("OTLP JSON: no resourceLogs: not a logs request", 0)
	}
	if i < 0 {
		l.bad = j.bad
		return false
	}
	for k := range l.recs { // the arena has stopped growing: its lines can be cut
		if rc := &l.recs[k]; rc.esc {
			rc.line = l.arena[rc.off:rc.end:rc.end]
		}
	}
	return true
}

// jScopeLogs reads a ScopeLogs' logRecords.
func (l *LogsDecoder) jScopeLogs(b []byte, at int) int {
	return l.jMessages(b, at, "logRecords", "log_records", l.jLogRecord)
}

// jMessages reads the object at b[at], calling each on every element of its array member
// named camel or pb, and skipping its other members.
func (l *LogsDecoder) jMessages(b []byte, at int, camel, pb string, each func(b []byte, at int) int) int {
	j := l.js
	return j.jObj(b, at, func(_, at int) int {
		if name := string(j.jsc.name); name == camel || name == pb {
			return j.jArr(b, at, func(at int) int { return each(b, at) })
		}
		return j.jSkip(b, at)
	})
}

// jLogRecord reads a LogRecord: timeUnixNano, observedTimeUnixNano, body, traceId and spanId.
func (l *LogsDecoder) jLogRecord(b []byte, start int) int {
	j := l.js
	var rc logRec
	var t, observed uint64
	end := j.jObj(b, start, func(_, at int) int {
		if k, ok := j.jNull(b, at); ok {
			return k
		}
		switch string(j.jsc.name) {
		case "timeUnixNano", "time_unix_nano":
			return j.jUint(b, at, &t)
		case "observedTimeUnixNano", "observed_time_unix_nano":
			return j.jUint(b, at, &observed)
		case "body":
			return l.jBody(b, at, &rc)
		case "traceId", "trace_id":
			return l.jID(b, at, &rc.ids, rc.ids.traceID[:])
		case "spanId", "span_id":
			return l.jID(b, at, &rc.ids, rc.ids.spanID[:])
		}
		return j.jSkip(b, at)
	})
	if end < 0 {
		return -1
	}
	if t == 0 {
		t = observed
	}
	rc.part, rc.ts = b[start:end:end], int64(t/1e6)
	l.recs = append(l.recs, rc)
	return end
}

// jBody reads a LogRecord's body, an AnyValue: a string (unescaped into the arena) or what
// else it is, validated and skipped.
func (l *LogsDecoder) jBody(b []byte, at int, rc *logRec) int {
	j := l.js
	return j.jObj(b, at, func(_, at int) int {
		if k, ok := j.jNull(b, at); ok {
			return k
		}
		kind := logBodyNone
		switch string(j.jsc.name) {
		case "stringValue", "string_value":
			var v attrVal
			k := j.jString(b, at, &v)
			if k < 0 {
				return -1
			}
			rc.body, rc.esc, rc.line = logBodyString, v.esc, v.b[:len(v.b):len(v.b)]
			if v.esc {
				rc.off = len(l.arena)
				l.arena, _ = textparse.Unquote(l.arena, v.b)
				rc.end, rc.line = len(l.arena), nil
			}
			return k
		case "kvlistValue", "kvlist_value":
			kind = logBodyKVList
		case "arrayValue", "array_value":
			kind = logBodyArray
		case "bytesValue", "bytes_value":
			kind = logBodyBytes
		case "boolValue", "bool_value", "intValue", "int_value", "doubleValue", "double_value":
			kind = logBodyScalar
		}
		if kind != logBodyNone {
			rc.body, rc.esc, rc.line = kind, false, nil
		}
		return j.jSkip(b, at)
	})
}

// jID reads a LogRecord's id at b[at] into dst, one of ids' arrays: a hex string of its
// length, "" for none; any other value (validated and skipped) makes ids invalid.
func (l *LogsDecoder) jID(b []byte, at int, ids *idFields, dst []byte) int {
	j := l.js
	if at < len(b) && b[at] == '"' {
		var v attrVal
		k := j.jString(b, at, &v)
		if k >= 0 {
			ids.setHexID(dst, v)
		}
		return k
	}
	ids.badID = true
	return j.jSkip(b, at)
}
