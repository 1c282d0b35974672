package event

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slide-metrics/slide/window"
)

// Map says how JSON lines of any shape (an access log's, a service's own) become events:
// one MapMetric per event a line gives, each naming the line's fields that hold its time,
// value, key and labels. slide serve --event-map reads it from a YAML file (cmd/slide parses
// the YAML, with its lines; this package takes the struct and holds it to its rules), and
// MapDecoder decodes lines by it, by the rules of the package doc: the same names, labels,
// refusals and interning as slide's own JSON events.
type Map struct {
	// Metrics are the events of one line, in order: at least one, at most MaxMapMetrics.
	Metrics []MapMetric
}

// MaxMapMetrics bounds the events one line gives through a Map.
const MaxMapMetrics = 16

// MapMetric is one event of a line: its metric, fixed, and the fields it is read from. A
// field is a member name, or a path of member names joined by dots into nested objects
// ("request.duration"); a member whose own name holds a dot cannot be named.
type MapMetric struct {
	// Metric names the event's metric (window.ValidName, at most Config.MaxKeyLen bytes).
	Metric string
	// TS is the field of the event's time; Field "" means none: every event takes the door's
	// time (the Kafka record's, the request's).
	TS MapTS
	// Value is the field of the event's value, required.
	Value MapValue
	// Key is the field of the event's key, required.
	Key MapKey
	// Labels are the event's labels, each read from a field: at most window.MaxLabels, names
	// by window.ValidLabelName, each once.
	Labels []MapLabel
	// Trace is where the event's trace and span ids are read (its exemplar's link to the
	// trace); Field "" means none.
	Trace MapTrace
	// Source is where the block was written ("file:line"), the prefix of Validate's errors;
	// "" for none.
	Source string
}

// MapTS is where an event's time is read, and how. A JSON string is RFC 3339 in textparse's
// strict shape, or a number written as text; a number is a count of Unit since the epoch
// (a fraction is kept to the millisecond, toward the past). Absent or null, the time is the
// door's, as for slide's own events.
type MapTS struct {
	Field string
	// Unit of a number: "s", "ms", "us" or "ns"; "" is "ms".
	Unit string
}

// MapValue is where an event's value is read: a JSON number, or a number written as text
// ("0.123", as a log that quotes every field writes it), times Scale.
type MapValue struct {
	Field string
	// Scale multiplies the value (nginx's $request_time is seconds: scale 1000 for ms); 0
	// means 1. Finite and not 0 once set.
	Scale float64
}

// MapKey is where an event's key is read: a string (by the key rule of events), or a number
// or a boolean as its text.
type MapKey struct {
	Field string
	// Default is the key of a line whose field is absent, null or "" (Envoy writes null for
	// what a request did not have, as the upstream cluster of a route not found); "" means
	// none: such a line is refused as missing_field.
	Default string
}

// MapLabel is a label read from a field: a string is its value (by the label rules of
// events), a number or a boolean its text; absent, null or "" gives no label.
type MapLabel struct {
	Name, Field string
}

// MapTrace is where an event's trace and span ids (window.Event.TraceID, SpanID: the link of
// its exemplar to its trace) are read. Field's value is a JSON string holding a W3C
// traceparent header's value (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>: both ids),
// a trace id of 32 hex digits, or one of 16 (a 64-bit B3 or Zipkin id, placed in the last 8
// bytes, as the Collector's zipkin receiver places it); Span's, a span id of 16 hex digits,
// which wins over a traceparent's. Hex digits of either case, JSON escapes decoded. A trace
// never refuses a line: a value absent, null, "", not a string or of another shape, or an
// all-zero trace id leaves the event without ids; a span absent, invalid or of zeros leaves
// it the traceparent's span id, or none. Through OTLP logs, ids from Field win over the
// LogRecord's own.
type MapTrace struct {
	Field string
	// Span is the field of the span id, only with Field.
	Span string
}

// Time units of MapTS.
var mapUnits = map[string]int{"": 0, "ms": 0, "s": 3, "us": -3, "ns": -6} // powers of ten to milliseconds

// Validate reports what NewMapDecoder would refuse: each problem, prefixed by its block's
// Source and metric, joined.
func (m Map) Validate() error { return m.validate(DefaultMaxKeyLen) }

func (m Map) validate(maxKey int) error {
	if len(m.Metrics) == 0 {
		return errors.New("event map: no metric")
	}
	if len(m.Metrics) > MaxMapMetrics {
		return fmt.Errorf("event map: %d metrics, at most %d", len(m.Metrics), MaxMapMetrics)
	}
	var errs []error
	for _, mm := range m.Metrics {
		errs = append(errs, mm.validate(maxKey)...)
	}
	return errors.Join(errs...)
}

func (mm MapMetric) validate(maxKey int) []error {
	var errs []error
	bad := func(format string, args ...any) {
		at := ""
		if mm.Source != "" {
			at = mm.Source + ": "
		}
		if mm.Metric != "" {
			at += fmt.Sprintf("metric %q: ", mm.Metric)
		}
		errs = append(errs, fmt.Errorf("%s"+format, append([]any{at}, args...)...))
	}
	switch {
	case mm.Metric == "":
		bad("no metric: name the events' metric (metric: latency_ms)")
	case len(mm.Metric) > maxKey:
		bad("metric of %d bytes, at most %d", len(mm.Metric), maxKey)
	case !window.ValidName(mm.Metric):
		bad("metric: not UTF-8, or holding a control or bidi character")
	}
	field := func(what, f string, required bool) {
		if f == "" {
			if required {
				bad("%s: no field (%s: {field: NAME})", what, what)
			}
			return
		}
		if err := checkPath(f); err != nil {
			bad("%s: field %q: %v", what, f, err)
		}
	}
	field("ts", mm.TS.Field, false)
	if _, ok := mapUnits[mm.TS.Unit]; !ok {
		bad("ts: unit %q: want s, ms, us or ns", mm.TS.Unit)
	}
	field("value", mm.Value.Field, true)
	if s := mm.Value.Scale; math.IsNaN(s) || math.IsInf(s, 0) {
		bad("value: scale %v: want a finite number", s)
	}
	field("key", mm.Key.Field, true)
	if d := mm.Key.Default; d != "" && (len(d) > maxKey || !window.ValidName(d)) {
		bad("key: default %q: not a valid key (1 to %d bytes of UTF-8 without control characters)", d, maxKey)
	}
	field("trace", mm.Trace.Field, false)
	if mm.Trace.Span != "" && mm.Trace.Field == "" {
		bad("trace: span without field (trace: {field: traceparent, span: NAME})")
	}
	field("trace: span", mm.Trace.Span, false)
	if len(mm.Labels) > window.MaxLabels {
		bad("%d labels, at most %d", len(mm.Labels), window.MaxLabels)
	}
	seen := map[string]bool{}
	for _, l := range mm.Labels {
		switch {
		case !window.ValidLabelName(l.Name):
			bad("label %q: not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not key, not starting with __)", l.Name)
		case seen[l.Name]:
			bad("label %q: given twice", l.Name)
		}
		seen[l.Name] = true
		field(fmt.Sprintf("label %q", l.Name), l.Field, true)
	}
	return errs
}

// checkPath checks a field's path: member names joined by dots, none of them empty.
func checkPath(f string) error {
	if len(f) > 1024 {
		return errors.New("longer than 1024 bytes")
	}
	if slices.Contains(strings.Split(f, "."), "") {
		return errors.New("an empty member name (a path is names joined by single dots)")
	}
	return nil
}
