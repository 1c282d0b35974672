package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/ingest"
)

// startBroker starts the embedded broker on a free port with a 3-partition "events" topic.
func startBroker(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := ingest.StartBroker(ctx, ingest.BrokerConfig{Addr: "127.0.0.1:0", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Addrs()[0]
}

// topicRecords reads every record of topic.
func topicRecords(t *testing.T, addr, topic string) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []kafka.Message
	for p := range 3 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: p, MaxWait: 200 * time.Millisecond})
		lag, err := r.ReadLag(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range lag {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		r.Close()
	}
	return out
}

func TestProduceGenerates(t *testing.T) {
	addr := startBroker(t)
	var out, errb bytes.Buffer
	err := cmdProduce(context.Background(), []string{"--brokers", addr, "--rate", "4000", "--keys", "10", "--duration", "500ms"},
		stdio{strings.NewReader(""), &out, &errb})
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, errb.String())
	}
	re := regexp.MustCompile(`^sent (\d+) events \((\d+) requests, 10 keys, 3 heavy\) to events on ` + regexp.QuoteMeta(addr) + ` in ([0-9.]+m?s): \d+ events/s, [0-9.]+ KiB\n$`)
	m := re.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("output %q does not match %s", out.String(), re)
	}
	sent, _ := strconv.Atoi(m[1])
	elapsed, err := time.ParseDuration(m[3])
	if err != nil {
		t.Fatal(err)
	}
	// The pacer sends record n no earlier than 10 ms before n/rate: never more than the rate
	// over the time the command says it took (how many it managed depends on the machine).
	if limit := 4000*(elapsed.Seconds()+0.01) + 1; sent < 1 || float64(sent) > limit {
		t.Errorf("sent %d events in %s at 4000/s: want 1 to %.0f", sent, elapsed, limit)
	}
	recs := topicRecords(t, addr, "events")
	if len(recs) != sent {
		t.Fatalf("topic holds %d records, the command says it sent %d", len(recs), sent)
	}
	dec, _ := event.NewDecoder(event.Config{})
	metrics := map[string]int{}
	for _, r := range recs {
		ev, reason := dec.Decode(r.Value, 0)
		if reason != event.ReasonNone || ev.Key != string(r.Key) || !strings.HasPrefix(ev.Key, "tenant-") {
			t.Fatalf("record %s (key %s): %v", r.Value, r.Key, reason)
		}
		metrics[ev.Metric]++
	}
	if metrics["latency_ms"] == 0 || metrics["cost"] == 0 || metrics["latency_ms"]+metrics["cost"] != sent {
		t.Errorf("metrics %v", metrics)
	}
	if traced := tracedEvents(t, recs); traced != 0 {
		t.Errorf("%d events carry trace ids without --trace-ids", traced)
	}
}

// tracedEvents counts the events of recs that carry a trace id.
func tracedEvents(t *testing.T, recs []kafka.Message) int {
	t.Helper()
	dec, _ := event.NewDecoder(event.Config{})
	n := 0
	for _, r := range recs {
		if ev, _ := dec.Decode(r.Value, 0); ev.TraceID != [16]byte{} {
			n++
		}
	}
	return n
}

// TestProduceTraceIDs: with --trace-ids every latency event carries a trace and a span id
// (for slide serve --exemplars), and no cost event does.
func TestProduceTraceIDs(t *testing.T) {
	addr := startBroker(t)
	var out, errb bytes.Buffer
	if err := cmdProduce(context.Background(), []string{"--brokers", addr, "--rate", "2000", "--keys", "5", "--duration", "200ms", "--trace-ids"},
		stdio{strings.NewReader(""), &out, &errb}); err != nil {
		t.Fatalf("produce: %v\n%s", err, errb.String())
	}
	recs := topicRecords(t, addr, "events")
	dec, _ := event.NewDecoder(event.Config{})
	latency := 0
	for _, r := range recs {
		ev, _ := dec.Decode(r.Value, 0)
		isLatency := ev.Metric == "latency_ms"
		if traced := ev.TraceID != [16]byte{} && ev.SpanID != [8]byte{}; traced != isLatency {
			t.Fatalf("record %s: traced %v", r.Value, traced)
		}
		if isLatency {
			latency++
		}
	}
	if latency == 0 {
		t.Fatalf("no latency event among %d records", len(recs))
	}
}

func TestProduceFile(t *testing.T) {
	addr := startBroker(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	lines := `{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5}
{"key":"tenant-7","metric":"cost","value":3}

not an event
{"key":"tenant-42","metric":"latency_ms","value":12}` // no final newline
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "replay", "--file", path},
		stdio{strings.NewReader(""), &out, &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^sent 4 records \(181 B\) from ` + regexp.QuoteMeta(path) + ` to replay on .* records/s; 1 line is not a valid event and was sent unkeyed \(line 4: invalid JSON: .*\)\n$`)
	if !re.MatchString(out.String()) {
		t.Fatalf("output %q does not match %s", out.String(), re)
	}
	got := map[string]string{}
	for _, r := range topicRecords(t, addr, "replay") {
		got[string(r.Value)] = string(r.Key)
	}
	want := map[string]string{
		`{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5}`: "tenant-42",
		`{"key":"tenant-7","metric":"cost","value":3}`:                              "tenant-7",
		`not an event`: "",
		`{"key":"tenant-42","metric":"latency_ms","value":12}`: "tenant-42",
	}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	for v, k := range want {
		if gk, ok := got[v]; !ok || gk != k {
			t.Errorf("record %s: key %q present %v, want key %q", v, gk, ok, k)
		}
	}

	// Records carry the time of sending unless --timestamps event gives them their event's ts.
	for _, r := range topicRecords(t, addr, "replay") {
		if d := time.Since(r.Time); d < 0 || d > time.Minute {
			t.Errorf("record %s: timestamp %v, want the time of sending", r.Value, r.Time)
		}
	}
	err = cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "history", "--file", path, "--timestamps", "event"},
		stdio{strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range topicRecords(t, addr, "history") {
		want := time.Since(r.Time) < time.Minute // no ts in the event: the time of sending
		if strings.Contains(string(r.Value), `"ts":1764489600123`) {
			want = r.Time.UnixMilli() == 1764489600123
		}
		if !want {
			t.Errorf("--timestamps event: record %s has timestamp %v", r.Value, r.Time)
		}
	}

	// stdin works the same way.
	out.Reset()
	err = cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "replay", "--file", "-"},
		stdio{strings.NewReader(lines), &out, &bytes.Buffer{}})
	if err != nil || !strings.HasPrefix(out.String(), "sent 4 records (181 B) from stdin to replay") {
		t.Fatalf("stdin replay: %v, %q", err, out.String())
	}
}

// TestProduceFileKeysLabelledEventsByKey: an event with labels is keyed by its key alone, as
// the map path keys and as --key-partitioner murmur2 expects (every series of a key in the
// key's partition), never by the store's series string with its separator bytes.
func TestProduceFileKeysLabelledEventsByKey(t *testing.T) {
	addr := startBroker(t)
	lines := `{"key":"tenant-42","metric":"latency_ms","value":87.5,"labels":{"route":"/pay","code":"200"}}
{"key":"tenant-42","metric":"latency_ms","value":12,"labels":{"route":"/refund"}}
{"key":"tenant-42","metric":"latency_ms","value":3}
`
	var out bytes.Buffer
	err := cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "labelled", "--file", "-"},
		stdio{strings.NewReader(lines), &out, &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	recs := topicRecords(t, addr, "labelled")
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3 (%s)", len(recs), out.String())
	}
	for _, r := range recs {
		if string(r.Key) != "tenant-42" {
			t.Errorf("record %s: key %q, want \"tenant-42\"", r.Value, r.Key)
		}
	}
}

// TestProduceFileEventMap: an access log replayed with --event-map is keyed by each line's
// event key (Envoy's upstream cluster, "-" when null: the preset's default), so each series
// stays in one partition, and --timestamps event stamps a record with its line's start_time;
// a line the map refuses is sent unkeyed and counted. Without the map, a file of no slide
// events says what to add.
func TestProduceFileEventMap(t *testing.T) {
	addr := startBroker(t)
	log, err := os.ReadFile("../../testdata/envoy-access.log")
	if err != nil {
		t.Fatal(err)
	}
	in := string(log) + `{"start_time":"2026-12-02T09:00:09.000Z","method":"GET"}` + "\n" // no duration
	var out bytes.Buffer
	err = cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "envoy", "--file", "-", "--event-map", "envoy", "--timestamps", "event"},
		stdio{strings.NewReader(in), &out, &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "sent 9 records") || !strings.HasSuffix(out.String(), `; 1 line the event map refuses was sent unkeyed (line 9: no field "duration"; no field "bytes_sent")`+"\n") {
		t.Fatalf("output %q", out.String())
	}
	for _, r := range topicRecords(t, addr, "envoy") {
		var line struct {
			Start    time.Time `json:"start_time"`
			Cluster  *string   `json:"upstream_cluster"`
			Duration *float64  `json:"duration"`
		}
		if err := json.Unmarshal(r.Value, &line); err != nil {
			t.Fatal(err)
		}
		want := "-"
		switch {
		case line.Duration == nil:
			want = ""
		case line.Cluster != nil:
			want = *line.Cluster
		}
		if string(r.Key) != want || (want != "" && !r.Time.Equal(line.Start)) {
			t.Errorf("record %.60s…: key %q at %v, want %q at %v", r.Value, r.Key, r.Time, want, line.Start)
		}
	}

	out.Reset()
	err = cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "raw", "--file", "-"},
		stdio{strings.NewReader(string(log)), &out, &bytes.Buffer{}})
	if err != nil || !strings.Contains(out.String(), `none of its 8 lines is a slide event (line 1: no field "key", "metric" or "value": a JSON line of another shape (an access log? --event-map reads it)): they were sent unkeyed (an access log? --event-map envoy, nginx or a map file keys them)`) {
		t.Fatalf("without the map: %v, %q", err, out.String())
	}
	// Slide events that the decoder refuses are no access log: the first one's refusal says why.
	out.Reset()
	bad := `{"key":"t-1","metric":"m","value":1,"labels":{"Bad-Name":"x"}}` + "\n" + `{"key":"t-1","metric":"m","value":2,"labels":{"Bad-Name":"y"}}` + "\n"
	err = cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "raw", "--file", "-"},
		stdio{strings.NewReader(bad), &out, &bytes.Buffer{}})
	if want := `; none of its 2 lines is a valid slide event (line 1: label "Bad-Name": not a Prometheus label name): they were sent unkeyed` + "\n"; err != nil || !strings.HasSuffix(out.String(), want) {
		t.Fatalf("slide events refused: %v, %q, want the suffix %q", err, out.String(), want)
	}
	if err := cmdProduce(context.Background(), []string{"--brokers", addr, "--event-map", "envoy"}, stdio{strings.NewReader(""), &out, &bytes.Buffer{}}); !errors.Is(err, errUsage) {
		t.Errorf("--event-map without --file: %v, want a usage error", err)
	}
	if err := cmdProduce(context.Background(), []string{"--brokers", addr, "--file", "-", "--event-map", "nosuch.yaml"}, stdio{strings.NewReader(""), &out, &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "the presets are envoy, nginx") {
		t.Errorf("a missing map: %v, want the presets named", err)
	}
}

// TestProduceFileLongLine: a line of --file over 1 MiB stops produce with an error naming
// it (it was read whole, however long, and sent); the lines before it are sent.
func TestProduceFileLongLine(t *testing.T) {
	addr := startBroker(t)
	in := `{"key":"a","metric":"cost","value":1}` + "\n" + `{"key":"b","metric":"cost","value":"` + strings.Repeat("9", maxProduceLine) + `"}` + "\n" + `{"key":"c","metric":"cost","value":1}` + "\n"
	var out bytes.Buffer
	err := cmdProduce(context.Background(), []string{"--brokers", addr, "--topic", "long", "--file", "-"},
		stdio{strings.NewReader(in), &out, &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "reading stdin: line 2: longer than 1048576 bytes") {
		t.Fatalf("err %v, want the line named", err)
	}
	if recs := topicRecords(t, addr, "long"); len(recs) != 1 || string(recs[0].Key) != "a" {
		t.Fatalf("records %v, want line 1's alone", recs)
	}
}

func TestProduceErrors(t *testing.T) {
	var errb bytes.Buffer
	s := stdio{strings.NewReader(""), &bytes.Buffer{}, &errb}
	if err := cmdProduce(context.Background(), []string{"extra"}, s); !errors.Is(err, errUsage) {
		t.Errorf("positional argument: %v, want errUsage", err)
	}
	if err := cmdProduce(context.Background(), []string{"--rate", "nope"}, s); !errors.Is(err, errUsage) {
		t.Errorf("bad --rate: %v, want errUsage", err)
	}
	for _, args := range [][]string{
		{"--rate", "-5"},
		{"--rate", "0"},
		{"--keys", "0"},
		{"--brokers", " , "},
		{"--duration", "-1s"},
		{"--topic", ""},
		{"--timestamps", "record"},
	} {
		if err := cmdProduce(context.Background(), args, s); !errors.Is(err, errUsage) || !strings.HasPrefix(err.Error(), args[0]+" ") {
			t.Errorf("%v: %v, want a usage error naming %s and its value", args, err, args[0])
		}
	}
	if err := cmdProduce(context.Background(), []string{"--keys", "2", "--heavy", "5"}, s); err == nil || !strings.Contains(err.Error(), "heavy") {
		t.Errorf("more heavy keys than keys: %v", err)
	}
	start := time.Now()
	err := cmdProduce(context.Background(), []string{"--brokers", freeAddr(t), "--connect-timeout", "300ms"}, s)
	if err == nil || !strings.Contains(err.Error(), "no broker") || time.Since(start) > 5*time.Second {
		t.Errorf("unreachable broker: %v after %v", err, time.Since(start))
	}
}
