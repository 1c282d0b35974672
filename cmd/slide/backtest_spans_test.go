package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/translator/zipkin/zipkinv2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// spanRequests are two requests of checkout's spans, batched out of time order as exporters
// do: 150 spans ending in 10:00:59.9 (the second request's) and 150 at 10:01:00.1 (the
// first's), each 5 ms long.
func spanRequests() []ptrace.Traces {
	var out []ptrace.Traces
	for _, end := range []string{"2025-11-30T10:01:00.100Z", "2025-11-30T10:00:59.900Z"} {
		at, _ := time.Parse(time.RFC3339Nano, end)
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "checkout")
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range 150 {
			sp := ss.Spans().AppendEmpty()
			sp.SetName("GET /pay")
			sp.SetTraceID(pcommon.TraceID{15: byte(1 + i)}) // ids, which Zipkin's JSON needs
			sp.SetSpanID(pcommon.SpanID{7: byte(1 + i)})
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(-5 * time.Millisecond)))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at))
		}
		out = append(out, td)
	}
	return out
}

// slide backtest --event-format replays spans: each a request of its service at its end, in
// time order whatever the batching, through otlp_json lines, length-framed otlp_proto,
// zipkin_json lines and length-framed zipkin_proto (the Collector's marshalers') alike; a refused span stops the replay naming
// its request and span.
func TestBacktestSpans(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(pol, []byte(`policies:
  - {name: log, algorithm: sliding_log, limit: 100, window: 60s}
`), 0o644)
	var jsonLog, protoLog, zipkinLog, zipkinProtoLog bytes.Buffer
	for _, td := range spanRequests() {
		z, err := zipkinv2.NewJSONTracesMarshaler().MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		zipkinLog.Write(append(z, '\n'))
		if z, err = zipkinv2.NewProtobufTracesMarshaler().MarshalTraces(td); err != nil {
			t.Fatal(err)
		}
		zipkinProtoLog.Write(binary.BigEndian.AppendUint32(nil, uint32(len(z))))
		zipkinProtoLog.Write(z)
		j, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		jsonLog.Write(append(j, '\n'))
		p, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		protoLog.Write(binary.BigEndian.AppendUint32(nil, uint32(len(p))))
		protoLog.Write(p)
	}
	want := `policy log (sliding_log 100/1m0s): 300 requests, 100 allowed, 200 denied
  most denied keys: checkout 200
  2025-11-30T10:00:00Z  50 denied, 100 allowed
  2025-11-30T10:01:00Z  150 denied, 0 allowed
`
	for format, log := range map[string]string{"otlp_json": jsonLog.String(), "otlp_proto": protoLog.String(), "zipkin_json": zipkinLog.String(), "zipkin_proto": zipkinProtoLog.String()} {
		code, out, stderr := runBacktest(t, log, "--policies", pol, "--event-format", format, "-")
		if code != 0 || out != want {
			t.Errorf("%s: exit %d\n got %s\nwant %s\nstderr %s", format, code, out, want, stderr)
		}
	}
	td := spanRequests()[0]
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(2).SetEndTimestamp(0) // ends before it starts
	j, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	code, _, stderr := runBacktest(t, "\n"+string(j)+"\n", "--policies", pol, "--event-format", "otlp_json", "-")
	if code == 0 || !strings.Contains(stderr, "line 2: span 3 refused: invalid_value: end before start by ") {
		t.Errorf("a span ending before it starts: exit %d, stderr %s", code, stderr)
	}
	if code, _, stderr := runBacktest(t, "", "--policies", pol, "--event-format", "otlp", "-"); code != 2 || !strings.Contains(stderr, "--event-format") {
		t.Errorf("--event-format otlp: exit %d, stderr %s", code, stderr)
	}
}
