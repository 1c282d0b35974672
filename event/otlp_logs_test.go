package event

import (
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/window"
)

// logsOf is a request whose LogRecords have the given bodies (each set by one func), split
// over two ResourceLogs as a Collector batching two files writes them.
func logsOf(bodies ...func(plog.LogRecord)) plog.Logs {
	ld := plog.NewLogs()
	var sl plog.ScopeLogs
	for i, set := range bodies {
		if i == 0 || i == (len(bodies)+1)/2 {
			rl := ld.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr("service.name", "envoy")
			sl = rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName("filelog")
		}
		lr := sl.LogRecords().AppendEmpty()
		lr.SetObservedTimestamp(pcommon.Timestamp(1_764_666_000_000_000_000 + i))
		lr.Attributes().PutStr("log.file.name", "access.log")
		lr.SetSeverityText("INFO")
		set(lr)
	}
	return ld
}

func marshalLogs(t testing.TB, ld plog.Logs) []byte {
	t.Helper()
	b, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logsEncodings are the kafka exporter's two encodings of logs and their decoders.
var logsEncodings = []logsEncoding{
	{"otlp_logs", &plog.ProtoMarshaler{}, NewOTLPLogs},
	{"otlp_logs_json", &plog.JSONMarshaler{}, NewOTLPLogsJSON},
}

// logsEncoding is an OTLP logs encoding: pdata's marshaler and slide's decoder of it.
type logsEncoding struct {
	name    string
	marshal plog.Marshaler
	decoder func(Map, Config) (*LogsDecoder, error)
}

// body marshals one request of log records set by sets, and returns it with a decoder of
// map m for the encoding.
func (enc logsEncoding) body(t *testing.T, m Map, sets ...func(plog.LogRecord)) ([]byte, *LogsDecoder) {
	t.Helper()
	body, err := enc.marshal.MarshalLogs(logsOf(sets...))
	if err != nil {
		t.Fatal(err)
	}
	l, err := enc.decoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return body, l
}

func strBody(line string) func(plog.LogRecord) {
	return func(lr plog.LogRecord) { lr.Body().SetStr(line) }
}

func envoyLogs(t testing.TB) *LogsDecoder {
	t.Helper()
	m, _ := Preset("envoy")
	l, err := NewOTLPLogs(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type logged struct {
	ev     window.Event
	r      Reason
	detail string
}

func decodeFormat(f Format, body []byte, def int64) []logged {
	var got []logged
	f.DecodeLines(body, def, func(part []byte, ev window.Event, r Reason) {
		g := logged{ev: ev, r: r}
		if r != ReasonNone {
			g.detail = f.Explain(part)
		}
		got = append(got, g)
	})
	return got
}

// The differential test: each string body decodes as the same line does through the same
// map, events, refusals and details alike.
func TestOTLPLogsMatchLines(t *testing.T) {
	raw, err := os.ReadFile("../testdata/envoy-access.log")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	lines = append(lines,
		envoyLine("2026-12-02T09:05:00.123Z", "GET", "/pay", "200", "-", 466, 3, ""), // no cluster: the key's default
		`{"start_time":"2026-12-02T09:05:01Z","method":"GET","response_code":503}`,   // no duration, no bytes_sent
		`{"start_time":"2026-12-02T09:05:02Z","duration":"fast","bytes_sent":1}`,     // not a number
		`not json`, `{"duration":3,"bytes_sent":10,"upstream_cluster":"c"}`) // no start_time: the records' time
	var sets []func(plog.LogRecord)
	for _, l := range lines {
		sets = append(sets, strBody(l))
	}
	const def = 1_764_666_000_000 // the Kafka record's ms: the observed time is these ms too
	md := presetDecoder(t, "envoy")
	want := decodeFormat(md, []byte(strings.Join(lines, "\n")), def)
	m, _ := Preset("envoy")
	for _, enc := range logsEncodings {
		body, l := enc.body(t, m, sets...)
		got := decodeFormat(l, body, def+5000)
		if len(got) != len(want) || len(got) != 2*len(lines)-1 {
			t.Fatalf("%s: %d events, want %d (%d lines)", enc.name, len(got), len(want), len(lines))
		}
		refused := 0
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: event %d: %+v, want %+v", enc.name, i, got[i], want[i])
			}
			if want[i].r != ReasonNone {
				refused++
			}
		}
		if refused < 4 {
			t.Errorf("%d refused: the test lines should refuse several", refused)
		}
	}
}

// A LogRecord's own time is the default ts: time_unix_nano, else observed_time_unix_nano,
// else the Kafka record's.
func TestOTLPLogsDefaultTS(t *testing.T) {
	line := `{"duration":3,"bytes_sent":10,"upstream_cluster":"c"}`
	at := time.UnixMilli(1_764_666_123_456)
	body := marshalLogs(t, logsOf(
		func(lr plog.LogRecord) { lr.Body().SetStr(line); lr.SetTimestamp(pcommon.NewTimestampFromTime(at)) },
		func(lr plog.LogRecord) { lr.Body().SetStr(line) }, // observed, 1_764_666_000_000 ms
		func(lr plog.LogRecord) { lr.Body().SetStr(line); lr.SetObservedTimestamp(0) },
	))
	got := decodeFormat(envoyLogs(t), body, 42)
	want := []int64{1_764_666_123_456, 1_764_666_123_456, 1_764_666_000_000, 1_764_666_000_000, 42, 42}
	if len(got) != len(want) {
		t.Fatalf("%d events: %+v", len(got), got)
	}
	for i, w := range want {
		if got[i].r != ReasonNone || got[i].ev.TS != w {
			t.Errorf("event %d: ts %d %s (%s), want %d", i, got[i].ev.TS, got[i].r, got[i].detail, w)
		}
	}
}

// A body that is not a string is one refusal that says what it is and what to configure.
func TestOTLPLogsBodyNotString(t *testing.T) {
	for _, enc := range logsEncodings {
		testBodyNotString(t, enc.marshal, enc.decoder)
	}
}

func testBodyNotString(t *testing.T, marshal plog.Marshaler, decoder func(Map, Config) (*LogsDecoder, error)) {
	line := `{"start_time":"2026-12-02T09:05:00Z","duration":3,"bytes_sent":10,"upstream_cluster":"c"}`
	body, err := marshal.MarshalLogs(logsOf(
		strBody(line),
		func(lr plog.LogRecord) { lr.Body().SetEmptyMap().PutStr("duration", "3") },
		func(lr plog.LogRecord) { lr.Body().SetEmptyBytes().FromRaw([]byte(line)) },
		func(plog.LogRecord) {},
		func(lr plog.LogRecord) { lr.Body().SetInt(3) },
		func(lr plog.LogRecord) { lr.Body().SetEmptySlice().AppendEmpty().SetStr(line) },
	))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Preset("envoy")
	l, err := decoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		r      Reason
		detail string
	}{
		{ReasonBadField, "body is a map (kvlist)"}, {ReasonBadField, "body is bytes"},
		{ReasonMissingField, "without a body"}, {ReasonBadField, "number or a boolean"}, {ReasonBadField, "body is an array"},
	}
	var got []string
	var wheres []string
	n := l.DecodeLines(body, 0, func(part []byte, ev window.Event, r Reason) {
		if r != ReasonNone {
			got = append(got, r.String()+" "+l.Explain(part))
			wheres = append(wheres, l.Where(body, part))
		}
	})
	if n != 2+len(want) || len(got) != len(want) {
		t.Fatalf("%d events, refusals %q", n, got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w.r.String()+" ") || !strings.Contains(got[i], w.detail) {
			t.Errorf("refusal %d: %q, want %s and %q", i, got[i], w.r, w.detail)
		}
		if wh := "log record " + string(rune('2'+i)); wheres[i] != wh {
			t.Errorf("refusal %d is at %q, want %q", i, wheres[i], wh)
		}
	}
	if !strings.Contains(got[0], "parse_to") {
		t.Errorf("a kvlist body's detail should say what to configure: %q", got[0])
	}
}

// A record that is not a logs request is refused whole, with a hint for JSON text and traces.
func TestOTLPLogsBadRecord(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("GET /pay")
	sp.SetTraceID(pcommon.TraceID{1, 2, 3})
	sp.SetSpanID(pcommon.SpanID{4})
	traces, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	good := marshalLogs(t, logsOf(strBody(`{"duration":1}`)))
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"json", []byte(`{"start_time":"2026-12-02T09:05:00Z","duration":3}`), "JSON text"},
		{"traces", traces, "OTLP traces"},
		{"truncated", good[:len(good)-3], "malformed protobuf"},
	} {
		l := envoyLogs(t)
		got := decodeFormat(l, c.body, 0)
		if len(got) != 1 || got[0].r != ReasonBadRecord || !strings.Contains(got[0].detail, c.want) {
			t.Errorf("%s: %+v, want one bad_record saying %q", c.name, got, c.want)
		}
		if w := l.Where(c.body, c.body); w != "the record" {
			t.Errorf("%s: at %q", c.name, w)
		}
	}
}

// otlp_logs_json refuses what is not a logs request whole, with a hint, never as no event:
// a raw line or a traces request is a JSON object too.
func TestOTLPLogsJSONBadRecord(t *testing.T) {
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("GET /pay")
	traces, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Preset("envoy")
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"line", []byte(`{"start_time":"2026-12-02T09:05:00Z","duration":3}`), "no resourceLogs: not a logs request at byte 0 (a JSON object of another shape"},
		{"traces", traces, "OTLP/JSON traces request"},
		{"protobuf", marshalLogs(t, logsOf(strBody(`{"duration":1}`))), "not JSON text: OTLP/protobuf logs"},
		{"string body", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":3}}]}]}]}`), "not a string"},
	} {
		l, err := NewOTLPLogsJSON(m, Config{})
		if err != nil {
			t.Fatal(err)
		}
		got := decodeFormat(l, c.body, 0)
		if len(got) != 1 || got[0].r != ReasonBadRecord || !strings.Contains(got[0].detail, c.want) {
			t.Errorf("%s: %+v, want one bad_record saying %q", c.name, got, c.want)
		}
	}
}

// Through an intake, as ingest and POST /v1/events read it: counts, where and why.
func TestOTLPLogsIntake(t *testing.T) {
	store, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Preset("envoy")
	in, err := NewIntake(store, Config{}, WithFormat(func() (Format, error) { return NewOTLPLogs(m, Config{}) }))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	line := `{"duration":3,"bytes_sent":10,"upstream_cluster":"c","response_code":200}`
	at := func(line string) func(plog.LogRecord) {
		return func(lr plog.LogRecord) { lr.Body().SetStr(line); lr.SetTimestamp(pcommon.Timestamp(now * 1e6)) }
	}
	old := `{"start_time":"2024-12-02T09:05:00Z","duration":3,"bytes_sent":10,"upstream_cluster":"c"}`
	body := marshalLogs(t, logsOf(at(line), at(`{"bytes_sent":1}`), at(line), at(old)))
	res := in.Take(body, now)
	if res.Accepted != 5 || res.Refused[ReasonMissingField] != 1 || res.Refused[ReasonLate] != 2 {
		t.Fatalf("%+v", res)
	}
	if f := res.First[ReasonMissingField]; f != `log record 2: no field "duration"` {
		t.Errorf("first refusal: %q", f)
	}
	if f := res.First[ReasonLate]; !strings.HasPrefix(f, "log record 4: ts 2024-12-02T09:05:00Z is ") {
		t.Errorf("first late: %q", f)
	}
}

func FuzzOTLPLogs(f *testing.F) {
	line := `{"start_time":"2026-12-02T09:05:00Z","duration":3,"bytes_sent":10,"upstream_cluster":"c"}`
	f.Add(marshalLogs(f, logsOf(strBody(line), func(lr plog.LogRecord) { lr.Body().SetEmptyMap().PutStr("a", "b") })))
	f.Add(marshalLogs(f, logsOf(strBody(`{"duration":"x"}`), func(plog.LogRecord) {})))
	f.Add([]byte{0x0a, 0x04, 0x12, 0x02, 0x12, 0x00}) // one empty LogRecord
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"5","body":{"stringValue":"{\"duration\":3}"}},{"body":null}]}]}]}`))
	traced := `{"duration":3,"bytes_sent":10,"upstream_cluster":"c","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
	f.Add(marshalLogs(f, logsOf(withIDs(line, recTrace, recSpan), strBody(line), withIDs(traced, recTrace, recSpan))))
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"` + recTraceHex + `","spanId":"` + recSpanHex + `","body":{"stringValue":"{\"duration\":3}"}},{"traceId":"x","body":{"stringValue":"{}"}}]}]}]}`))
	m, _ := Preset("envoy")
	for i := range m.Metrics { // the map's trace as well as the records'
		m.Metrics[i].Trace = MapTrace{Field: "traceparent"}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dec := range []func(Map, Config) (*LogsDecoder, error){NewOTLPLogs, NewOTLPLogsJSON} {
			fuzzLogs(t, dec, m, body)
		}
	})
}

// fuzzLogs: whatever body holds, a decoder of dec never panics, returns the events it handed
// on, and a part given back decodes to its first event again.
func fuzzLogs(t *testing.T, dec func(Map, Config) (*LogsDecoder, error), m Map, body []byte) {
	{
		l, err := dec(m, Config{})
		if err != nil {
			t.Fatal(err)
		}
		var parts [][]byte
		var evs []logged
		n := l.DecodeLines(body, 7, func(part []byte, ev window.Event, r Reason) {
			parts = append(parts, part)
			evs = append(evs, logged{ev: ev, r: r})
			l.Where(body, part)
			if r != ReasonNone {
				l.Explain(part)
			}
		})
		if n != len(parts) {
			t.Fatalf("returned %d, handed %d", n, len(parts))
		}
		for i, p := range parts { // a part given back decodes to what it did
			var again []logged
			l.DecodeLines(p, 7, func(_ []byte, ev window.Event, r Reason) { again = append(again, logged{ev: ev, r: r}) })
			if len(again) == 0 {
				t.Fatalf("part %d gave nothing back", i)
			}
			j := i
			for j > 0 && &parts[j-1][0] == &p[0] && len(parts[j-1]) == len(p) {
				j--
			}
			if again[0] != evs[j] {
				t.Fatalf("part %d: %+v again, was %+v", i, again[0], evs[j])
			}
		}
	}
}

// An empty or blank body is refused, not skipped as a blank line is: a log record is never
// dropped without a word.
func TestOTLPLogsEmptyString(t *testing.T) {
	got := decodeFormat(envoyLogs(t), marshalLogs(t, logsOf(strBody(""), strBody("  "))), 0)
	if len(got) != 2 || got[0].r != ReasonInvalidJSON || got[1].r != ReasonInvalidJSON || !strings.Contains(got[1].detail, "empty or blank string") {
		t.Fatalf("%+v", got)
	}
}

// Once its slices and the map's intern table have grown, a body costs no allocation, in
// either encoding (the JSON one unescapes its string bodies into a reused arena), its ids
// included.
func TestOTLPLogsAllocs(t *testing.T) {
	line := `{"start_time":"2026-12-02T09:05:00Z","duration":3,"bytes_sent":10,"upstream_cluster":"c","method":"GET","response_code":200}`
	m, _ := Preset("envoy")
	for _, enc := range logsEncodings {
		body, l := enc.body(t, m, strBody(line), withIDs(line, recTrace, recSpan), strBody(`{"duration":"x"}`))
		n := 0
		fn := func([]byte, window.Event, Reason) { n++ }
		l.DecodeLines(body, 0, fn)
		if a := testing.AllocsPerRun(100, func() { l.DecodeLines(body, 0, fn) }); a != 0 || n != 102*6 {
			t.Errorf("%s: %v allocations a body, %d events", enc.name, a, n)
		}
	}
}
