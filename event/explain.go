package event

import (
	"bytes"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// A refusal's detail says which field and what is wrong with it, in a short line:
//
//	no field "value"
//	field "ts": "1764489600123" is a string of digits, not unix ms or RFC 3339
//	label "Bad-Name": not a Prometheus label name
//	ts 2026-12-02T09:05:00Z is 5m0s ahead of the record (skew 10s)
//
// It costs nothing on the accepting path: it is built only for a refused line, by running the
// scanner path's checks on it again (Explain), and the values it quotes are clipped and
// escaped (quote), so that a hostile line cannot write a newline into a log or a header.

// maxQuoted is how many bytes of a value a detail quotes.
const maxQuoted = 64

// binaryLine reports a line holding a control byte that JSON text has none of outside strings'
// escapes (tab, and a line end's CR, aside): protobuf's tags and lengths.
func binaryLine(line []byte) bool {
	for i, c := range line {
		if c < 0x20 && c != '\t' && (c != '\r' || i != len(line)-1) {
			return true
		}
	}
	return false
}

// Explain says why d refuses line, in a short line naming the field and what is wrong with it
// (`no field "value"`, `field "value": NaN`), or "" when d decodes it. It decodes line again by
// the scanner path, the one source of refusals, and allocates: call it for a refused line
// only. The store's refusals (future, late, expired, series_cap) are the intake's to explain
// (Intake.Explain).
func (d *Decoder) Explain(line []byte) string {
	d.f = [numFields + 1]textparse.Value{}
	if !d.parseObject(line) {
		if err := d.sc.Err(); err != nil {
			if len(line) >= schemaFrame && line[0] == 0 {
				return schemaFrameOnly(line)
			}
			if binaryLine(line) {
				// A topic of OTLP protobuf (a Collector's kafka exporter) read as slide's JSON.
				return "invalid JSON: " + err.Error() + " (binary, not JSON text: OTLP protobuf?)"
			}
			if FormatOf(line) == "zipkin_json" {
				return "invalid JSON: " + err.Error() + " (a JSON list: Zipkin's spans? --event-format zipkin_json reads them, POST /api/v2/spans takes them)"
			}
			return "invalid JSON: " + err.Error()
		}
		return "invalid JSON: NaN or Infinity outside the value"
	}
	if d.dup != 0 {
		return `field "` + eventFields[bits.TrailingZeros8(d.dup)] + `": given twice (a field appears at most once)`
	}
	b := line
	if d.f[fKey].Kind == textparse.Absent && d.f[fMetric].Kind == textparse.Absent && d.f[fValue].Kind == textparse.Absent {
		if connectEnvelope(line) {
			return `no field "key", "metric" or "value": a Kafka Connect JsonConverter envelope ({"schema":…,"payload":…}); ` +
				`set value.converter.schemas.enable=false on the connector, or name payload.key, payload.value… in an --event-map`
		}
		if hint := otlpJSONRequest(line); hint != "" {
			return `no field "key", "metric" or "value": ` + hint
		}
		// A topic of access logs (or any JSON of another shape) read as slide's events.
		return `no field "key", "metric" or "value": a JSON line of another shape (an access log? --event-map reads it)`
	}
	if s := d.explainName(b, "key", fKey, false); s != "" {
		return s
	}
	if s := d.explainName(b, "metric", fMetric, true); s != "" {
		return s
	}
	switch v := d.f[fValue]; v.Kind {
	case textparse.Absent:
		return `no field "value"`
	case textparse.Null:
		return `field "value": null`
	case textparse.NaN:
		return `field "value": ` + string(v.Bytes(b))
	case textparse.Number:
		if _, err := textparse.ParseFloat(v.Bytes(b)); err != nil {
			return `field "value": ` + clip(v.Bytes(b)) + ` is beyond float64`
		}
	default:
		return `field "value": ` + kindName(v.Kind) + `, not a number`
	}
	if v := d.f[fTS]; v.Kind != textparse.Absent {
		if _, r := d.TS(b, v, 0); r != ReasonNone {
			return d.explainTS(b, v)
		}
	}
	switch c := d.f[fCount]; c.Kind {
	case textparse.Absent, textparse.Null:
	case textparse.Number:
		if n, ok := textparse.ParseUint(c.Bytes(b)); !ok || n == 0 {
			return `field "count": ` + clip(c.Bytes(b)) + ` is not an integer ≥ 1`
		}
	default:
		return `field "count": ` + kindName(c.Kind) + `, not an integer`
	}
	switch l := d.f[fLabels]; l.Kind {
	case textparse.Absent, textparse.Null:
	case textparse.Object:
		if _, r := d.readLabels(l.Bytes(b)); r != ReasonNone {
			return d.explainLabel()
		}
	default:
		return `field "labels": ` + kindName(l.Kind) + `, not an object`
	}
	return ""
}

// explainName is Explain for the key or metric, field k of d.f: "" when it passes.
func (d *Decoder) explainName(b []byte, field string, k int, metric bool) string {
	v := d.f[k]
	switch v.Kind {
	case textparse.Absent:
		return `no field "` + field + `"`
	case textparse.Null:
		return `field "` + field + `": null`
	case textparse.String:
	default:
		return `field "` + field + `": ` + kindName(v.Kind) + `, not a string`
	}
	if _, r := d.name(b, v, metric); r == ReasonNone {
		return ""
	}
	s := v.Bytes(b)
	if v.Escaped {
		var lossy bool
		if s, lossy = d.unquote(s); lossy {
			return `field "` + field + `": not valid UTF-8`
		}
	}
	switch {
	case len(s) == 0:
		return `field "` + field + `": empty`
	case len(s) > d.maxKey:
		return `field "` + field + `": ` + strconv.Itoa(len(s)) + ` bytes, more than ` + strconv.Itoa(d.maxKey)
	}
	return `field "` + field + `": ` + whyNotName(s)
}

// explainTS is Explain for a ts that d.TS refused.
func (d *Decoder) explainTS(b []byte, v textparse.Value) string {
	s := v.Bytes(b)
	switch v.Kind {
	case textparse.String:
		if v.Escaped {
			s, _ = d.unquote(s)
		}
		if digits(s) {
			return `field "ts": ` + quote(s) + ` is a string of digits, not unix ms or RFC 3339`
		}
		return `field "ts": ` + quote(s) + ` is not RFC 3339`
	case textparse.Number:
		return `field "ts": ` + clip(s) + ` is not an integer of unix ms`
	}
	return `field "ts": ` + kindName(v.Kind) + `, not unix ms or RFC 3339`
}

// explainLabel is Explain for the labels readLabels refused, from d.lab.bad.
func (d *Decoder) explainLabel() string {
	l := &d.lab
	what := ""
	switch l.bad.why {
	case labelBadName:
		// key and __* follow Prometheus' syntax and are refused for another reason: say it.
		switch name := string(l.buf[l.bad.name:l.bad.nameEnd]); {
		case name == window.KeyLabel:
			what = `reserved: the series' key is the event's "key" field`
		case strings.HasPrefix(name, "__"):
			what = "reserved: a name starting with __ is Prometheus' own"
		default:
			what = "not a Prometheus label name"
		}
	case labelTwice:
		what = "given twice"
	case labelTooMany:
		what = "more than " + strconv.Itoa(window.MaxLabels) + " labels"
	case labelNotString:
		what = "value not a string"
	case labelLossy:
		what = "value not valid UTF-8"
	case labelTooLong:
		what = "value of " + strconv.Itoa(len(l.buf)-int(l.bad.nameEnd)) + " bytes, more than " + strconv.Itoa(window.MaxLabelValueLen)
	case labelBadValue:
		what = "value " + whyNotName(l.buf[l.bad.nameEnd:])
	default:
		return `field "labels": invalid`
	}
	return "label " + quote(l.buf[l.bad.name:l.bad.nameEnd]) + ": " + what
}

// whyNotName says why window.ValidName refuses s.
func whyNotName(s []byte) string {
	if !utf8.Valid(s) {
		return "not valid UTF-8"
	}
	for _, c := range string(s) {
		switch {
		case c < 0x20 || c >= 0x7f && c <= 0x9f:
			return "holds a control character"
		case c >= 0x202a && c <= 0x202e || c >= 0x2066 && c <= 0x2069:
			return "holds a bidi override or isolate"
		}
	}
	return "not a valid name"
}

// digits reports that s is one or more ASCII digits.
func digits(s []byte) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(s) > 0
}

// kindName names a JSON value's type in a detail: "a string", "an array".
func kindName(k textparse.Kind) string {
	switch k {
	case textparse.False, textparse.True:
		return "a boolean"
	case textparse.Number:
		return "a number"
	case textparse.String:
		return "a string"
	case textparse.Object:
		return "an object"
	case textparse.Array:
		return "an array"
	case textparse.Null:
		return "null"
	}
	return "not a JSON value"
}

// clip is a JSON number's text, clipped to maxQuoted bytes with "…" after (a number holds
// no byte that needs escaping).
func clip(s []byte) string {
	if len(s) <= maxQuoted {
		return string(s)
	}
	return string(s[:maxQuoted]) + "…"
}

// quote is s in Go's double quotes, clipped to maxQuoted bytes (on a rune's start) with "…"
// after: a control byte, a quote or invalid UTF-8 is escaped, so a detail is one printable line.
func quote(s []byte) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(string(s))
	}
	n := maxQuoted
	for n > maxQuoted-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(string(s[:n])) + "…"
}

// Explain says why the intake refused line for r, at now (unix ms), from the record rec when
// it came in one (ingest; nil over HTTP): the format's detail (Format.Explain) for a
// format's reason, the event's time against its reference and the ring's bound for future,
// late and expired, its metric for series_cap. Call it with a refused part only: it decodes
// line again with d, and allocates.
func (in *Intake) Explain(d Format, line []byte, r Reason, now int64, rec *Record) string {
	switch r {
	case ReasonFuture, ReasonLate, ReasonExpired, ReasonSeriesCap:
	default:
		if s := d.Explain(line); s != "" {
			return s
		}
		return r.String()
	}
	def, ref, refName := now, now, "now"
	if rec != nil {
		def = rec.TS
		if r != ReasonExpired {
			ref, refName = rec.TS, "the record"
		}
	}
	var ev window.Event
	dr := ReasonInvalidJSON // none decoded
	first := true
	d.DecodeLines(line, def, func(_ []byte, e window.Event, r Reason) {
		if first {
			ev, dr, first = e, r, false
		}
	})
	if dr != ReasonNone {
		return r.String()
	}
	if r == ReasonSeriesCap {
		return "a new series of metric " + quote([]byte(ev.Metric)) + " over the series cap" + in.capHint(ev.Metric)
	}
	rc := in.store.RingConfig(ev.Metric)
	ts := "ts " + time.UnixMilli(ev.TS).UTC().Format(time.RFC3339Nano)
	read := 0 // slide's JSON reads unix ms; an --event-map's ts the unit it says; OTLP ns, Zipkin µs
	switch f := d.(type) {
	case *MapDecoder:
		read = f.tsUnit(ev.Metric)
	case *LogsDecoder: // a line's ts is the map's; one from the LogRecord's time is right in any unit
		read = f.md.tsUnit(ev.Metric)
	case *SpanDecoder:
		read = -6
		if f.zipkin {
			read = -3 // Zipkin's µs
		}
	}
	if r == ReasonFuture {
		return ts + " is " + gap(ev.TS-ref) + " ahead of " + refName + " (skew " + rc.Skew.String() + ")" + unitHint(ev.TS, ref, read)
	}
	return ts + " is " + gap(ref-ev.TS) + " behind " + refName + " (retention " + rc.Retention().String() + ")" + unitHint(ev.TS, ref, read)
}

// capHint names the cap a new series of metric meets, and the flag that sets it: what an
// operator raises. "" when none is met any more (series went since the refusal).
func (in *Intake) capHint(metric string) string {
	switch which, limit, weight := in.store.CapFor(metric); which {
	case window.CapSeries:
		return ": the store holds its " + strconv.FormatInt(limit, 10) + " series (--max-series, or what --max-memory sets)"
	case window.CapMetric:
		return ": the metric holds its " + strconv.FormatInt(limit, 10) + " series (--max-series-per-metric)"
	case window.CapBytes:
		return ": its " + strconv.FormatInt(weight, 10) + " bytes when busy would take the store's series past " + strconv.FormatInt(limit, 10) + " (--max-memory)"
	}
	return ""
}

// gap says n milliseconds as a duration up to two days, in days up to ten years, then in
// years: a ts in the wrong unit is decades off, beyond what a time.Duration holds.
func gap(n int64) string {
	const day = 24 * 3600 * 1000
	switch {
	case n < 2*day:
		return (time.Duration(n) * time.Millisecond).String()
	case n < 3653*day:
		return strconv.FormatInt((n+day/2)/day, 10) + " days"
	}
	return strconv.FormatInt(int64(math.Round(float64(n)/(365.25*day))), 10) + " years"
}

// unitNames are the units a ts is read or written in, by their power of ten to milliseconds.
var unitNames = map[int]string{3: "seconds", 0: "milliseconds", -3: "microseconds", -6: "nanoseconds"}

// unitHint names the likely mistake when ts is off from ref by a factor of 1,000, 1,000,000
// or 1,000,000,000 (to within a year): a timestamp written in another unit than the one read,
// read being that unit's power of ten to milliseconds (slide's JSON takes unix ms, 0; an
// --event-map's ts says its unit). "" otherwise.
func unitHint(ts, ref int64, read int) string {
	const year = 365.25 * 24 * 3600 * 1000
	if ts <= 0 || ref <= 0 {
		return ""
	}
	for _, k := range []int{3, -3, 6, -6, 9} { // ts × 10^k is ref: written in units 10^k × those read
		if math.Abs(float64(ts)*math.Pow10(k)-float64(ref)) >= year {
			continue
		}
		written, ok := unitNames[read+k]
		if !ok {
			return ""
		}
		f, how := "1000", "small"
		switch k {
		case -3:
			how = "large"
		case 6:
			f = "1,000,000"
		case -6:
			f, how = "1,000,000", "large"
		case 9:
			f = "1,000,000,000"
		}
		return ": " + f + "× too " + how + ", a ts in " + written + " where " + unitNames[read] + " are read?"
	}
	return ""
}

// schemaFrameOnly explains a line that starts as Confluent Schema Registry frames a value and
// holds no JSON object after the frame (a Kafka record's framed JSON is read past its frame),
// or one with JSON after it, which only a Kafka record is read past (POST /v1/events).
func schemaFrameOnly(line []byte) string {
	id := uint32(line[1])<<24 | uint32(line[2])<<16 | uint32(line[3])<<8 | uint32(line[4])
	if len(line) > schemaFrame && jsonAfterFrame(line[schemaFrame]) {
		return "invalid JSON: starts with Confluent Schema Registry framing (magic 0, schema id " + strconv.FormatUint(uint64(id), 10) +
			"): a Kafka record is read past it, a body over HTTP is not; send the JSON without the frame"
	}
	return "invalid JSON: starts with Confluent Schema Registry framing (magic 0, schema id " + strconv.FormatUint(uint64(id), 10) +
		") and no JSON object after it: an Avro or Protobuf serializer's? slide reads JSON, framed (KafkaJsonSchemaSerializer, JsonSchemaConverter) or not"
}

// FormatOf names the --event-format of JSON text slide reads that is not slide's own
// event, by a look at line (its members, not a parse): "otlp_json" for an OTLP/JSON traces
// request, "otlp_logs_json" for a logs one, "zipkin_json" for a list of Zipkin spans; ""
// for anything else. A refusal of such a line read as slide's events (Explain, a backtest's
// log) names the flag that reads it.
func FormatOf(line []byte) string {
	switch t := bytes.TrimLeft(line, " \t"); {
	case len(t) > 0 && t[0] == '[' && bytes.Contains(t, []byte(`"traceId"`)):
		return "zipkin_json"
	case bytes.Contains(line, []byte(`"resourceSpans"`)) || bytes.Contains(line, []byte(`"resource_spans"`)):
		return "otlp_json"
	case bytes.Contains(line, []byte(`"resourceLogs"`)) || bytes.Contains(line, []byte(`"resource_logs"`)):
		return "otlp_logs_json"
	}
	return ""
}

// otlpJSONRequest says which flag reads line when it is an OTLP/JSON request read as slide's
// events (a Collector's kafka exporter with encoding: otlp_json, or such a body posted to
// POST /v1/events), else "".
func otlpJSONRequest(line []byte) string {
	switch FormatOf(line) {
	case "otlp_json":
		return "an OTLP/JSON traces request (--event-format otlp_json reads it; POST /v1/traces takes it whatever the format)"
	case "otlp_logs_json":
		return "an OTLP/JSON logs request (--event-format otlp_logs_json with --event-map reads it; POST /v1/logs takes it with --event-map)"
	}
	return ""
}

// connectEnvelope reports whether line looks like what Kafka Connect's JsonConverter writes
// with schemas.enable=true (its default): {"schema":…,"payload":…}, the schema first.
func connectEnvelope(line []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte(`{"schema":`)) && bytes.Contains(line, []byte(`"payload":`))
}
