// Package event owns what an event is and how one is read: the decoder of the event schema,
// its refusal reasons, the encoder that writes it, and the intake that takes a body of
// events into a window.Store. Kafka records (ingest), POST /v1/events (query) and the
// backtest's request log (limiter/backtest) all read events here, so the three doors accept
// and refuse the same events for the same reasons.
//
// # What an event is
//
// A decoded event is a window.Event, the store's own observation type, filled in place (no
// second struct is copied on the hot path): Metric and Key name its series, Value is the
// observation, Count its weight, TS its time in unix milliseconds. A format fills those five;
// Feed is the door's (ingest sets the record's partition, window.FeedOf; the API none). An
// event with labels has as its Key the series string of its key and labels (window's
// encoding, window.AppendSeries: key 0xFF name=value …, sorted by name); one without is keyed
// by its key alone, byte for byte as before labels.
//
// # One set of rules
//
// Every door holds an event to these, in this order, and names a refusal by its Reason:
//
//   - The line is one JSON object (invalid_json otherwise), field names matched exactly,
//     other members validated and skipped. A line giving key, metric, value, ts, count,
//     labels, trace_id or span_id twice (escaped or not) is bad_field, `field "key": given
//     twice`, before any other check: which one counts would be a guess (encoding/json takes
//     the last, other readers the first), and POST /v1/allow refuses such a body too. Other
//     members may repeat.
//   - key and metric are strings, present and not empty (missing_field), at most
//     Config.MaxKeyLen bytes (256 by default; key_too_long), and pass window.ValidName, the
//     key rule of every door: valid UTF-8, never rewritten to U+FFFD, without C0 or C1
//     controls, DEL or bidi overrides and isolates (bad_field).
//   - value is present (missing_field) and a JSON number within float64 (invalid_value for
//     NaN, ±Infinity, or beyond float64; bad_field for another type).
//   - ts is unix milliseconds as a JSON integer, or RFC 3339 in textparse's strict shape as
//     a JSON string; a string of digits is neither (bad_field). Absent or null, it is the
//     door's: the Kafka record's timestamp, the request's time over HTTP. A log of requests,
//     which has no such time, requires it.
//   - count is a JSON integer ≥ 1, default 1 (bad_field otherwise).
//   - labels is optional: an object of string values, {"route":"/pay","code":"200"}, in any
//     position among the members; null or {} is none (bad_field for another type). Names and
//     values are unescaped as keys are, and the first member that breaks a rule names the
//     refusal: a name failing window.ValidLabelName (Prometheus' [a-zA-Z_][a-zA-Z0-9_]*, not
//     "key", not starting with "__"), a name an earlier member gave, a member past the
//     sixteenth (window.MaxLabels, empty values counted), a value that is not a string, is
//     not UTF-8 or holds what window.ValidName refuses, are bad_field; a value longer than
//     256 bytes (window.MaxLabelValueLen) is key_too_long, as an over-long key is. An empty
//     value is no label (Prometheus' rule): {"code":""} is the series without code.
//   - trace_id (32 hex digits, or 16 for a 64-bit id) and span_id (16) are optional and
//     refuse nothing: an id that is not one, or all zeros, gives the event no TraceID and
//     SpanID, and a span_id without a trace_id none (Decoder says the rule whole).
//   - Then the store judges the event's time and series (Intake, ReasonOf): future when ts
//     is beyond the ring's skew ahead of its reference, late when older than the metric's
//     retention, expired when in its window at its Kafka record's time but out of it at now
//     (the references are the record's timestamp while it agrees with now, as window.Source
//     says, and now over HTTP), series_cap when a new series meets the store's cap or its
//     metric's (window.StoreConfig.MaxSeriesPerMetric).
//
// # Refusals say what
//
// A Reason is the code a refusal is counted and filtered by; its detail says which field and
// what is wrong with it, in one short line: `no field "value"`, `field "ts": "1764489600123"
// is a string of digits, not unix ms or RFC 3339`, `label "Bad-Name": not a Prometheus label
// name`, `ts 2026-12-02T09:05:00Z is 5m0s ahead of the record (skew 10s)`, `invalid JSON:
// no opening brace at byte 0`. Decoder.Explain says the decoder's, Intake.Explain the
// store's too (the event's time against its reference and the ring's skew or retention, and
// for a ts 1,000, 1,000,000 or 1,000,000,000 times off its reference the unit it was likely
// written in, against the unit read (an --event-map's ts unit, OTLP's nanoseconds, else
// milliseconds):
// `ts 1970-01-21T10:08:09.6Z is 56 years behind now (retention 5m0s): 1000× too small, a ts
// in seconds where milliseconds are read?`), and Result.First carries the first of each Reason of a body with its line. A detail is
// built only for a refused line, by decoding it again with the scanner path's checks
// (explain.go), so the accepting path costs what it did; quoted values are clipped to 64
// bytes and Go-quoted, so a hostile line cannot put a newline into a log line or a header.
//
// Decoder, Intake and the field readers (Decoder.TS, Name, CheckName, for a format that
// carries an event's fields among its own, as the backtest's request log does) are these
// rules; nothing else restates them.
//
// # Decoding
//
// Decoder is a hand-written parser, 0 allocations per event once its key, metric and series
// string are interned, checked against encoding/json by a differential test and a fuzz
// target. Three paths (decode_fast.go, and decode_names.go for the names they read):
// Append's exact layout read word by word, a member loop for the same members in any order, spaced, repeated or among other members (skipped
// by the scanner's own MemberName and SkipValue, in the same pass), to which the first hands
// its position, and the scanner path for the rest, the one source of refusals, which goes
// on from the last member the others read; FuzzDecodeFast holds the first two to the third.
// Labels are the member loop's and the scanner path's (decode_labels.go, one reader for
// both): exact hands a labels member to the loop as it hands any member not in its layout,
// so events without labels keep their speed. Names and series strings are interned in an
// open-addressing table (decode_intern.go) whose lookups are bounded under collisions. Append (encode.go) writes the layout the first path reads; it
// is why the package imports jsonenc, beside window and textparse (TestImports holds it to
// those and the standard library).
//
// # The intake
//
// Intake takes a body into a store under its admission rules: Take for an NDJSON body at the
// request's time (POST /v1/events), TakeRecord for a Kafka record's value with its timestamp
// and feed through a decoder per partition (ingest, which counts, logs and dead-letters each
// refusal the callback hands it). Both decode, observe and map the store's error to a Reason
// in the same function, and allocate nothing per event once its series exists.
//
// # OTLP traces
//
// NewOTLPProto and NewOTLPJSON read OpenTelemetry spans (otlp.go), one
// ExportTraceServiceRequest a body, as the Collector's kafka exporter writes them (otlp_proto,
// its default, and otlp_json). Each span is one event: metric duration_ms (SpanMetric), value
// end − start in fractional milliseconds, ts its end in unix ms (floored); key the resource
// attribute service.name (SpanConfig.KeyAttribute); labels span_name, span_kind
// (SPAN_KIND_SERVER, …), status_code (STATUS_CODE_UNSET|OK|ERROR) and each attribute of
// SpanConfig.Dimensions, the span's, else the resource's, named as Prometheus' OTLP
// translation names it (SpanLabelName: http.route → http_route). An absent attribute, an
// empty one, or one holding an array, a map or bytes gives no label; an integer, a boolean or
// a double is written as pdata's AsString writes it (500, true, 0.25). Of attributes given
// twice the first counts, as pdata's Map.Get finds it. The key and the labels are held to the
// rules above, through the slide JSON decoder's own intern table, label scratch and series
// encoding: a key absent or empty is missing_field, one over Config.MaxKeyLen key_too_long,
// one failing window.ValidName bad_field, and a label value as a labels member's is. A span
// ending before it starts is invalid_value (its duration would be negative), a kind or status
// code OTLP does not define bad_field. A body that is not a request is refused whole as
// bad_record (ReasonBadRecord), one refusal whose part is the body and none of its spans
// counted: malformed protobuf (a truncated varint, a length past its message, a group, field
// 0, a field the scan reads with another wire type), JSON that is not JSON or not a
// request's shape, or an AnyValue nested deeper than 32. Strings the events do not use are not
// checked for UTF-8. A refused span's part is its bytes (its field in protobuf, its object in
// JSON); Result.First says where it is as "span N" (from 1, in the request's order) or "the
// record", and Explain what: `resource attribute "service.name": absent`, `end before start
// by 2.5ms`, `malformed protobuf: length past its message at byte 17`.
//
// Both are a scan over the body, never an object tree (otlp_proto.go, otlp_json.go): a body is
// read in one pass into the decoder's pending spans, which are handed on after it, so 0
// allocations per span once keys and series are interned. A span's series string is written
// (appendSeriesLabel, window's encoding) and held to the rules once: the decoder remembers the
// series of the parts it was written from (the key's and labels' bytes or numbers as read, at
// most Config.MaxInterned of them), and a span of parts seen before takes that series
// without writing any text again. A small cache in front of that (otlp_recent.go) holds the
// series of recent spans by their parts as words read in place, so a span of a series seen
// lately is neither written nor looked up in a map. They are held to pdata's unmarshalers by a differential
// test over random pdata traces and by FuzzOTLPProto and FuzzOTLPJSON. AppendOTLP writes a
// request of one service's spans in protobuf (slide produce --otlp), a writer of our own that
// pdata reads back span for span.
//
// # Zipkin spans
//
// NewZipkinJSON reads Zipkin's v2 JSON (zipkin.go), a list of spans a body, as
// zipkin-reporter's Kafka sender and the Collector's kafka exporter (zipkin_json) write it,
// through the OTLP/JSON reader's walk and into the same span events: each span is the event
// it makes through the Collector's zipkin receiver (contrib's zipkinv2 translator) and
// NewOTLPProto, its key localEndpoint.serviceName, its dimensions tags. A span without a
// timestamp or a duration is missing_field, where the receiver makes it 0 ms at 1970. A
// differential test over random pdata traces written by the Collector's zipkin_json marshaler,
// and FuzzZipkinJSON, hold it to the receiver. NewZipkinProto reads the same lists in Zipkin's
// proto3 encoding (zipkin_proto.go: the OTLP wire scan's pbNext over zipkin.proto's fields)
// into the same events, held to the receiver's proto3 unmarshaler the same ways.
//
// # Formats: where a new one goes
//
// A Format (format.go) reads a body into events: DecodeLines hands each event with the part
// of the body it came from (a line, a span's bytes) and its Reason, Explain says a refused
// part's detail. *Decoder, slide's JSON, is the default; NewIntake's WithFormat gives the
// intake a constructor of another, called once per goroutine (ingest keeps one per
// partition, Intake.NewFormat; Take pools them). A new format (otlp_logs.go: access logs
// shipped as OTLP logs, their lines read by a map) is one file in this package that reads its input into window.Event values by the
// rules above, refusing with the same Reasons (a new Reason only for what the rules above
// cannot say), so that every door that takes it observes and reasons as the JSON events do.
// The intake calls the package's formats by their types, so that nothing per event escapes
// to the heap; a Format of another type costs nothing per event either (its refusals are
// handed on after its body is read). A format that is not line-based says where a part is
// in its body by a Locator ("span 3"). Its fuzz target and its differential test against a
// reference reader go with it, and its benchmark in a *_timing_test.go file.
//
// # Access logs and any JSON: maps
//
// A Map (map.go) names, for each event a JSON line of another shape gives, the fields that
// hold its time (RFC 3339 text, or a number of s, ms, us or ns), value (a number, or a
// number's text, times a scale), key and labels; nested fields by dots, several metrics a
// line. MapDecoder is its Format: one walk over a line's members (map_scan.go: names matched
// by first byte and length, every other member validated and skipped by the scanner's
// SkipValue, so a line that is not one JSON object is invalid_json as slide's own are), then
// each metric's event by the rules above: the key by Decoder.Name's rule (or a number's or a
// boolean's text, or the map's default when absent), labels by the labels member's rules
// (a number or a boolean as its text; absent, null or "" is no label), names and series
// strings through the decoder's intern table, 0 allocations a line once they are interned.
// A field absent from a line is missing_field, `no field "duration"` (the details of metrics
// refused for different things joined by "; "); a ts absent is the door's, as for slide's
// events. A block's trace field (MapTrace: a traceparent, a 128- or 64-bit trace id, and a
// span id field) gives its events their TraceID and SpanID for exemplars (map_trace.go), read
// after the rest of the event, never refusing it: absent or invalid, no ids. Presets
// (map_presets.go): envoy, Envoy Gateway's default JSON access log, and nginx, the
// log_format docs/sre.md writes out; neither format logs a trace, so neither reads one. The YAML of --event-map is cmd/slide's (eventmap.go):
// this package takes the struct, and Map.Validate holds it to these rules.
package event
