package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// The formats --event-format names.
const (
	formatSlide     = "slide"
	formatOTLPProto = "otlp_proto"
	formatOTLPJSON  = "otlp_json"
	formatZipkin    = "zipkin_json"
	formatZipkinPB  = "zipkin_proto"
	formatOTLPLogs  = "otlp_logs"
	formatLogsJSON  = "otlp_logs_json"
)

// logsFormats are the formats of OTLP logs, whose log records' bodies --event-map reads: their
// decoders by name.
var logsFormats = map[string]func(event.Map, event.Config) (*event.LogsDecoder, error){
	formatOTLPLogs: event.NewOTLPLogs,
	formatLogsJSON: event.NewOTLPLogsJSON,
}

// errLogsWithoutMap refuses --event-format otlp_logs without the --event-map that reads its
// log records' bodies.
var errLogsWithoutMap = &flagError{"event-format", errors.New("otlp_logs and otlp_logs_json read each log record's body (an access log's JSON line) through --event-map: give one (envoy, nginx or a YAML FILE)")}

// eventFormatFlags are --event-format, --span-key and --span-dimensions: what a Kafka
// record's value (serve) or a log line (backtest) is.
type eventFormatFlags struct {
	format  string
	spanKey string
	spanDim string
}

func (f *eventFormatFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&f.format, "event-format", formatSlide, "what events are: slide (slide's JSON events), otlp_proto or otlp_json (OpenTelemetry spans, one ExportTraceServiceRequest a record, as the Collector's kafka exporter writes them: each span an event of metric duration_ms), zipkin_json and zipkin_proto (Zipkin's v2 span lists in JSON or proto3, as zipkin-reporter's Kafka sender writes them), or otlp_logs and otlp_logs_json (serve: OpenTelemetry logs in protobuf or JSON, one ExportLogsServiceRequest a record, each log record's string body a JSON line read through --event-map, which they require)")
	fs.StringVar(&f.spanKey, "span-key", event.DefaultSpanKey, "spans: the resource attribute that is a span's key (Zipkin: service.name is localEndpoint.serviceName, another names a tag)")
	fs.StringVar(&f.spanDim, "span-dimensions", "", "spans: span or resource attributes (Zipkin: tags) that become labels, comma separated, e.g. http.route,http.response.status_code (named with _ for what a label name cannot hold: http_route)")
}

// spanConfig is the span flags as an event.SpanConfig, or their error.
func (f *eventFormatFlags) spanConfig(maxKeyLen int) (event.SpanConfig, error) {
	cfg := event.SpanConfig{Config: event.Config{MaxKeyLen: maxKeyLen}, KeyAttribute: f.spanKey}
	for _, d := range strings.Split(f.spanDim, ",") {
		if d = strings.TrimSpace(d); d != "" {
			cfg.Dimensions = append(cfg.Dimensions, d)
		}
	}
	if f.spanKey == "" {
		return cfg, &flagError{"span-key", errors.New("empty: want a resource attribute")}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, &flagError{"span-dimensions", err}
	}
	return cfg, nil
}

// newFormat is the constructor of the format the flags name, for event.WithFormat and
// ingest.Config.Format: nil for slide's JSON (the default of both).
func (f *eventFormatFlags) newFormat(maxKeyLen int) (func() (event.Format, error), error) {
	return f.newFormatOf(f.format, maxKeyLen)
}

func (f *eventFormatFlags) newFormatOf(format string, maxKeyLen int) (func() (event.Format, error), error) {
	var newDec func(event.SpanConfig) (*event.SpanDecoder, error)
	switch format {
	case formatSlide:
		return nil, nil
	case formatOTLPProto:
		newDec = event.NewOTLPProto
	case formatOTLPJSON:
		newDec = event.NewOTLPJSON
	case formatZipkin:
		newDec = event.NewZipkinJSON
	case formatZipkinPB:
		newDec = event.NewZipkinProto
	case formatOTLPLogs, formatLogsJSON: // their constructor is recordFormat's, which has the map
		return nil, errLogsWithoutMap
	default:
		return nil, &flagError{"event-format", errors.New("want slide, otlp_proto, otlp_json, zipkin_json, zipkin_proto, otlp_logs or otlp_logs_json")}
	}
	cfg, err := f.spanConfig(maxKeyLen)
	if err != nil {
		return nil, err
	}
	return func() (event.Format, error) { return newDec(cfg) }, nil
}

// logsIntakes are POST /v1/logs' intakes into store (query.Config.Logs): OTLP/HTTP logs in
// protobuf and JSON whose log records' bodies --event-map reads, whatever --event-format the
// records have; none without an event map (the route then answers 501).
func (c *serveConfig) logsIntakes(store *window.Store) (map[string]*event.Intake, error) {
	if c.eventMap == "" {
		return nil, nil
	}
	m, err := loadEventMap(c.eventMap)
	if err != nil {
		return nil, err
	}
	out := map[string]*event.Intake{}
	for ct, format := range map[string]string{"application/x-protobuf": formatOTLPLogs, "application/json": formatLogsJSON} {
		newLogs := logsFormats[format]
		if out[ct], err = event.NewIntake(store, event.Config{}, event.WithFormat(func() (event.Format, error) { return newLogs(m, event.Config{}) })); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recordFormat is the reader of Kafka records and POST /v1/events bodies that --event-map or
// --event-format names (nil: slide's JSON events); the two exclude each other but for
// the OTLP logs formats, whose log records' bodies the map reads, and which require it.
func (c *serveConfig) recordFormat() (func() (event.Format, error), error) {
	if newLogs, ok := logsFormats[c.events.format]; ok {
		if c.eventMap == "" {
			return nil, errLogsWithoutMap
		}
		m, err := loadEventMap(c.eventMap)
		if err != nil {
			return nil, err
		}
		if _, err := newLogs(m, event.Config{}); err != nil {
			return nil, fmt.Errorf("--event-map: %w", err)
		}
		return func() (event.Format, error) { return newLogs(m, event.Config{}) }, nil
	}
	if c.eventMap != "" && c.events.format != formatSlide {
		return nil, &flagError{"event-format", errors.New("--event-map reads JSON lines of its own shape: not with --event-format " + c.events.format)}
	}
	if c.eventMap != "" {
		return eventMapFormat(c.eventMap, event.Config{})
	}
	return c.events.newFormat(0)
}

// eventsIdentity names how records become events (--event-format and its span flags, or the
// rules of --event-map), for ingest.SnapshotConfig.Events: a snapshot written under another
// is replayed from the log instead of loaded, so that dropping a span dimension or renaming
// a metric in the map does not leave the restore span in series the log no longer makes.
func (c *serveConfig) eventsIdentity() (string, error) {
	if c.eventMap != "" {
		m, err := loadEventMap(c.eventMap)
		if err != nil {
			return "", err
		}
		for i := range m.Metrics {
			m.Metrics[i].Source = "" // where a block was read, not what it does
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "%+v", m))
		id := "event-map " + hex.EncodeToString(sum[:8])
		if _, ok := logsFormats[c.events.format]; ok {
			id = c.events.format + " " + id
		}
		return id, nil
	}
	if c.events.format == formatSlide {
		return formatSlide, nil
	}
	cfg, err := c.events.spanConfig(0)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s span-key=%s span-dimensions=%s", c.events.format, cfg.KeyAttribute, strings.Join(cfg.Dimensions, ",")), nil
}

// intakes are POST /v1/events' intakes into store (query.Config.Events and EventsByType): def's
// (the records' format, nil for slide's JSON) for application/json and any other type,
// otlp_proto for application/x-protobuf (def's when it is otlp_logs), slide's JSON for
// application/x-ndjson.
func (f *eventFormatFlags) intakes(store *window.Store, def func() (event.Format, error)) (*event.Intake, map[string]*event.Intake, error) {
	mk := func(nf func() (event.Format, error)) (*event.Intake, error) {
		var opts []event.IntakeOption
		if nf != nil {
			opts = append(opts, event.WithFormat(nf))
		}
		return event.NewIntake(store, event.Config{}, opts...)
	}
	in, err := mk(def)
	if err != nil {
		return nil, nil, err
	}
	byType := map[string]*event.Intake{"application/x-protobuf": in, "application/x-ndjson": in}
	if f.format != formatOTLPProto && f.format != formatOTLPLogs { // otlp_logs: protobuf too
		proto, err := f.newFormatOf(formatOTLPProto, 0)
		if err != nil {
			return nil, nil, err
		}
		if byType["application/x-protobuf"], err = mk(proto); err != nil {
			return nil, nil, err
		}
	}
	if def != nil {
		if byType["application/x-ndjson"], err = mk(nil); err != nil {
			return nil, nil, err
		}
	}
	return in, byType, nil
}

// Span intakes by media type: POST /v1/traces' (OTLP/HTTP's two encodings) and POST
// /api/v2/spans' (Zipkin's span API, JSON and proto3).
var (
	traceFormats  = map[string]string{"application/x-protobuf": formatOTLPProto, "application/json": formatOTLPJSON}
	zipkinFormats = map[string]string{"application/json": formatZipkin, "application/x-protobuf": formatZipkinPB}
)

// spanIntakes are intakes into store of the span formats a body's media type names
// (formats: traceFormats for query.Config.Traces, zipkinFormats for query.Config.Zipkin), with
// the span flags whatever --event-format the records have.
func (f *eventFormatFlags) spanIntakes(store *window.Store, formats map[string]string) (map[string]*event.Intake, error) {
	out := map[string]*event.Intake{}
	for ct, format := range formats {
		nf, err := f.newFormatOf(format, 0)
		if err != nil {
			return nil, err
		}
		if out[ct], err = event.NewIntake(store, event.Config{}, event.WithFormat(nf)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
