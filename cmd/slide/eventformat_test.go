package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve refuses span flags it cannot use before anything starts, naming the flag.
func TestServeEventFormatFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--event-format", "otlp"}, "--event-format otlp: want slide, otlp_proto, otlp_json, zipkin_json, zipkin_proto, otlp_logs or otlp_logs_json"},
		{[]string{"--event-format", "otlp_logs_json"}, "through --event-map: give one"},
		{[]string{"--event-format", "otlp_logs"}, "--event-format otlp_logs: otlp_logs and otlp_logs_json read each log record's body (an access log's JSON line) through --event-map: give one"},
		{[]string{"--event-format", "otlp_proto", "--event-map", "envoy"}, "--event-map reads JSON lines of its own shape"},
		{[]string{"--event-format", "otlp_json", "--span-dimensions", "http.route,http_route"}, `both are label "http_route"`},
		{[]string{"--event-format", "otlp_proto", "--span-dimensions", "span.name"}, `label "span_name" is one of a span's own`},
		{[]string{"--event-format", "otlp_proto", "--span-key", ""}, "--span-key"},
	} {
		var stderr strings.Builder
		code := run(context.Background(), append([]string{"serve"}, c.args...), stdio{strings.NewReader(""), &strings.Builder{}, &stderr})
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// eventsIdentity changes with what makes series of records (the span flags, a map's rules)
// and not with where a map was read from: a restart under other rules replays the log
// instead of loading a snapshot of series the log no longer makes.
func TestEventsIdentity(t *testing.T) {
	dir := t.TempDir()
	mapFile := func(name, metric string) string {
		p := filepath.Join(dir, name)
		body := "metric: " + metric + "\nvalue: {field: ms}\nkey: {field: tenant}\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	id := func(c serveConfig) string {
		t.Helper()
		s, err := c.eventsIdentity()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	slide := id(serveConfig{events: eventFormatFlags{format: formatSlide, spanKey: "service.name"}})
	withRoute := id(serveConfig{events: eventFormatFlags{format: formatOTLPProto, spanKey: "service.name", spanDim: "http.route"}})
	without := id(serveConfig{events: eventFormatFlags{format: formatOTLPProto, spanKey: "service.name"}})
	mapA := id(serveConfig{eventMap: mapFile("a.yaml", "latency_ms"), events: eventFormatFlags{format: formatSlide}})
	mapMoved := id(serveConfig{eventMap: mapFile("b.yaml", "latency_ms"), events: eventFormatFlags{format: formatSlide}})
	mapRenamed := id(serveConfig{eventMap: mapFile("c.yaml", "latency"), events: eventFormatFlags{format: formatSlide}})
	logsA := id(serveConfig{eventMap: mapFile("a.yaml", "latency_ms"), events: eventFormatFlags{format: formatOTLPLogs}})
	if logsA == mapA || !strings.HasPrefix(logsA, "otlp_logs event-map ") {
		t.Errorf("a map's identity read from OTLP logs %q, from lines %q", logsA, mapA)
	}
	if slide != "slide" || withRoute == without || mapA != mapMoved || mapA == mapRenamed || mapA == slide {
		t.Errorf("identities: slide %q, spans with a route %q and without %q, a map %q, moved %q, its metric renamed %q",
			slide, withRoute, without, mapA, mapMoved, mapRenamed)
	}
}

// backtest says where OTLP logs are read instead of replaying them as spans.
func TestBacktestRefusesLogsFormats(t *testing.T) {
	for _, format := range []string{"otlp_logs", "otlp_logs_json"} {
		var stderr strings.Builder
		args := []string{"backtest", "--policies", "p.yaml", "--event-format", format, "--event-map", "envoy", "-"}
		code := run(context.Background(), args, stdio{strings.NewReader(""), &strings.Builder{}, &stderr})
		if want := format + " is read by slide serve"; code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("backtest --event-format %s: exit %d, stderr %q; want 2 and %q", format, code, stderr.String(), want)
		}
	}
}
