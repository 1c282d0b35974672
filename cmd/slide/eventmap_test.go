package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/query"
)

// TestEventMapFile: a map file's blocks become the event.Map they say, shorthands and a list
// of blocks included.
func TestEventMapFile(t *testing.T) {
	m, err := parseEventMap([]byte(`
- metric: latency_ms
  ts: {field: start_time}
  value: {field: duration, scale: 1}
  key: {field: upstream_cluster, default: "-"}
  labels: {code: response_code, method: method}
- metric: bytes_sent
  ts: {field: at, unit: us}
  value: bytes.sent
  key: upstream_cluster
  trace: {field: http.traceparent, span: span_id}
- metric: errors
  value: e
  key: k
  trace: trace_id
`), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := event.Map{Metrics: []event.MapMetric{
		{Metric: "latency_ms", TS: event.MapTS{Field: "start_time"}, Value: event.MapValue{Field: "duration", Scale: 1},
			Key: event.MapKey{Field: "upstream_cluster", Default: "-"}, Labels: []event.MapLabel{{Name: "code", Field: "response_code"}, {Name: "method", Field: "method"}},
			Source: "m.yaml:2"},
		{Metric: "bytes_sent", TS: event.MapTS{Field: "at", Unit: "us"}, Value: event.MapValue{Field: "bytes.sent"},
			Key: event.MapKey{Field: "upstream_cluster"}, Trace: event.MapTrace{Field: "http.traceparent", Span: "span_id"}, Source: "m.yaml:7"},
		{Metric: "errors", Value: event.MapValue{Field: "e"}, Key: event.MapKey{Field: "k"}, Trace: event.MapTrace{Field: "trace_id"}, Source: "m.yaml:12"},
	}}
	if fmt.Sprintf("%+v", m) != fmt.Sprintf("%+v", want) {
		t.Errorf("got  %+v\nwant %+v", m, want)
	}
	one, err := parseEventMap([]byte("metric: m\nvalue: v\nkey: k\n"), "one.yaml")
	if err != nil || len(one.Metrics) != 1 || one.Metrics[0].Value.Field != "v" {
		t.Errorf("one block: %+v, %v", one, err)
	}
}

// TestEventMapFileErrors: a bad map file is refused at start, each problem with file:line.
func TestEventMapFileErrors(t *testing.T) {
	for _, c := range []struct {
		file string
		want []string
	}{
		{"", []string{"m.yaml:1: empty file"}},
		{"metric: m\nvalue: v\nkey: k\nlabel: {a: b}\n", []string{`m.yaml:4: unknown field "label" (a metric has metric, ts, value, key, labels, trace)`}},
		{"metric: m\nvalue: v\nkey: k\ntrace: {span: span_id}\n", []string{`m.yaml:4: trace: span without field (trace: {field: traceparent, span: span_id})`}},
		{"metric: m\nvalue: v\nkey: k\ntrace: {field: tp, parent: p}\n", []string{`m.yaml:4: trace: unknown field "parent" (trace has field, span)`}},
		{"metric: m\nvalue: v\nkey: k\ntrace: {field: \"\", span: s}\n", []string{`m.yaml:4: trace: field: empty`}},
		{"metric: m\nvalue: v\nkey: k\ntrace: \"\"\n", []string{`m.yaml:4: trace: no field`}},
		{"metric: m\nvalue: v\nkey: k\ntrace: {field: [a]}\n", []string{`m.yaml:4: trace: field must be a single value`}},
		{"metric: m\nvalue: v\nkey: k\ntrace: {field: a..b}\n", []string{`m.yaml:1: metric "m": trace: field "a..b": an empty member name`}},
		{"metric: m\nvalue: {field: v, scale: fast}\nkey: k\n", []string{`m.yaml:2: value: scale "fast": want a number, not 0`}},
		{"metric: m\nvalue: {scale: 2}\nkey: k\n", []string{`m.yaml:2: value: no field (value: {field: NAME})`}},
		{"metric: m\nvalue: v\nkey: {field: k, fallback: x}\n", []string{`m.yaml:3: key: unknown field "fallback" (key has field, default)`}},
		{"metric: m\nvalue: v\nkey: k\nlabels: [a, b]\n", []string{`m.yaml:4: labels must be a mapping`}},
		{"metric: m\nvalue: v\nkey: k\nlabels:\n  code: status\n  code: status2\n", []string{`m.yaml:6: labels: "code" given twice`}},
		{"- metric: m\n  value: v\n  key: k\n- metric: n\n  value: v\n  key: k\n  ts: {field: t, unit: minutes}\n", []string{`m.yaml:4: metric "n": ts: unit "minutes": want s, ms, us or ns`}},
		{"metric: m\nvalue: v\nkey: k\nlabels: {Bad-Name: x}\n", []string{`m.yaml:1: metric "m": label "Bad-Name": not a label name`}},
		{"metric: m\nvalue: v\n", []string{`m.yaml:1: metric "m": key: no field`}},
		{"metric: [m]\nvalue: v\nkey: k\nts: {unit: s}\n", []string{`m.yaml:1: metric must be a single value`, `m.yaml:4: ts: no field`}},
		{"metric: m\n  value: v\n", []string{`m.yaml: yaml: line 2`}},
	} {
		_, err := parseEventMap([]byte(c.file), "m.yaml")
		if err == nil {
			t.Errorf("%q: parsed", c.file)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q:\n%v\nwant it to say %s", c.file, err, w)
			}
		}
	}
	// serve and backtest stop at start, naming the file's line.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("metric: m\nvalue: v\nkey: k\nlabels: {code: }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, context.Background(), "", "serve", "--addr", "127.0.0.1:0", "--event-map", bad)
	if code == 0 || !strings.Contains(stderr, bad+`:4: label "code": no field`) {
		t.Errorf("serve with a bad map: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCmd(t, context.Background(), "", "serve", "--addr", "127.0.0.1:0", "--event-map", "apache")
	if code == 0 || !strings.Contains(stderr, "the presets are envoy, nginx") {
		t.Errorf("serve with an unknown map: exit %d, %s", code, stderr)
	}
}

// accessSeries is one series of the done-when test: what its access-log lines hold.
type accessSeries struct {
	key, code, method, flags string
	n                        int // lines; a multiple of 20, where nearest-rank p95 and the sketch's rank agree
}

// accessLog writes the lines of series in a preset's format (envoy or nginx), shuffled, at
// times in the minute before now, and returns them with each series' latencies and bytes.
func accessLog(preset string, series []accessSeries, now time.Time) (lines []string, lat, sent map[accessSeries][]float64) {
	rng := rand.New(rand.NewPCG(27, 3))
	lat, sent = map[accessSeries][]float64{}, map[accessSeries][]float64{}
	for _, s := range series {
		for range s.n {
			at := now.Add(-time.Duration(5000+rng.IntN(50000)) * time.Millisecond)
			ms := 1 + rng.IntN(900)
			bytes := rng.IntN(20000)
			var line string
			switch preset {
			case "envoy":
				cl := `"` + s.key + `"`
				if s.key == "-" {
					cl = "null"
				}
				line = fmt.Sprintf(`{"start_time":"%s","method":"%s","x-envoy-origin-path":"/pay?id=%d","protocol":"HTTP/1.1","response_code":%s,"response_flags":"%s","response_code_details":"via_upstream","connection_termination_details":null,"upstream_transport_failure_reason":null,"bytes_received":0,"bytes_sent":%d,"duration":%d,"x-envoy-upstream-service-time":null,"x-forwarded-for":"10.244.0.12","user-agent":"curl/8.5.0","x-request-id":"%08x-5f1d-45ea-bb4a-fa1ccd03b82b",":authority":"pay.example.com","upstream_host":"10.244.0.13:3000","upstream_cluster":%s,"upstream_local_address":"10.244.0.14:58822","downstream_local_address":"10.244.0.14:3000","downstream_remote_address":"10.244.0.12:34805","requested_server_name":null,"route_name":"httproute/default/pay/rule/0/match/0/pay_example_com"}`,
					at.UTC().Format("2006-01-02T15:04:05.000Z"), s.method, rng.IntN(1000), s.code, s.flags, bytes, ms, rng.Uint32(), cl)
				lat[s] = append(lat[s], float64(ms))
			case "nginx":
				// $request_time in seconds with milliseconds: what the map scales by 1000.
				rt := fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
				line = fmt.Sprintf(`{"msec":%d.%03d,"host":"%s","method":"%s","uri":"/cart/%d","status":%s,"request_time":%s,"bytes_sent":%d,"upstream_addr":"10.0.0.7:8080","request_id":"%032x"}`,
					at.Unix(), at.Nanosecond()/1e6, s.key, s.method, rng.IntN(1000), s.code, rt, bytes, rng.Uint64())
				lat[s] = append(lat[s], float64(ms)/1000*1000)
			}
			sent[s] = append(sent[s], float64(bytes))
			lines = append(lines, line)
		}
	}
	rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	return lines, lat, sent
}

// TestEventMapThroughKafka is issue #27's "done when" for access logs: lines in each preset's
// format, produced to the embedded broker (one line a record, or several as NDJSON) and read
// by slide serve --event-map: every series' count is exact, its p95 within the sketch's 1% of
// the nearest-rank truth, the counts per status code exact, and by= groups exactly the label
// values sent. POST /v1/events reads the same lines, and says a refused one's field.
func TestEventMapThroughKafka(t *testing.T) {
	for _, c := range []struct {
		preset string
		labels []string // the labels a series has besides key, as by= names them
		series []accessSeries
	}{
		{"envoy", []string{"code", "method", "flags"}, []accessSeries{
			{"httproute/default/pay/rule/0", "200", "GET", "-", 200},
			{"httproute/default/pay/rule/0", "503", "GET", "UF", 40},
			{"httproute/default/pay/rule/0", "200", "POST", "-", 100},
			{"httproute/default/cart/rule/0", "200", "GET", "-", 120},
			{"httproute/default/cart/rule/0", "503", "POST", "UF", 60},
			{"-", "404", "GET", "NR", 20}, // no route: Envoy writes null for the cluster
		}},
		{"nginx", []string{"code", "method"}, []accessSeries{
			{"shop.example.com", "200", "GET", "", 160},
			{"shop.example.com", "502", "POST", "", 40},
			{"api.example.com", "200", "POST", "", 100},
			{"api.example.com", "404", "GET", "", 20},
		}},
	} {
		t.Run(c.preset, func(t *testing.T) {
			broker := kafkatest.Start(t, "access", 2)
			addr := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			var errb proctest.Buffer
			go func() {
				done <- run(ctx, []string{"serve", "--addr", addr, "--brokers", broker.Addr, "--topic", "access",
					"--group", "evmap-" + c.preset, "--snapshot-interval", "0", "--event-map", c.preset},
					stdio{strings.NewReader(""), io.Discard, &errb})
			}()
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Error("serve did not stop")
				}
			}()
			base := "http://" + addr
			waitHTTP(t, base+"/healthz").Body.Close()

			now := time.Now()
			lines, lat, sent := accessLog(c.preset, c.series, now)
			var msgs []kafka.Message
			for i := 0; i < len(lines); {
				n := 1 + i%7 // one line a record, or up to seven as NDJSON
				n = min(n, len(lines)-i)
				msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(strings.Join(lines[i:i+n], "\n"))})
				i += n
			}
			broker.Produce(t, msgs...)

			// Every series' count exact and its p95 within 1% of the nearest-rank truth.
			by := append([]string{"key"}, c.labels...)
			var groups []query.WindowGroup
			deadline := time.Now().Add(30 * time.Second)
			for {
				groups = mapWindowGroups(t, base, "latency_ms", by)
				total := uint64(0)
				for _, g := range groups {
					total += g.Count
				}
				if total == uint64(len(lines)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d events read: %+v\n%s", total, len(lines), groups, proctest.Tail(errb.String(), 20))
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(groups) != len(c.series) {
				t.Errorf("%d series, want %d: %+v", len(groups), len(c.series), groups)
			}
			for _, s := range c.series {
				g, ok := mapGroupOf(groups, map[string]string{"key": s.key, "code": s.code, "method": s.method, "flags": s.flags})
				if !ok {
					t.Errorf("no series %+v in %+v", s, groups)
					continue
				}
				vs := slices.Clone(lat[s])
				sort.Float64s(vs)
				truth := vs[int(math.Ceil(0.95*float64(len(vs))))-1]
				p95 := g.Quantiles["0.95"]
				if g.Count != uint64(s.n) || p95 == nil || math.Abs(*p95-truth) > 0.01*truth+1e-9 {
					t.Errorf("%+v: count %d, p95 %v; want %d, %g ±1%%", s, g.Count, deref64(p95), s.n, truth)
				}
			}
			// Error counts exact per status code, and by= groups exactly the values sent.
			for _, label := range c.labels {
				want := map[string]uint64{}
				for _, s := range c.series {
					v := map[string]string{"code": s.code, "method": s.method, "flags": s.flags}[label]
					want[v] += uint64(s.n)
				}
				got := map[string]uint64{}
				for _, g := range mapWindowGroups(t, base, "latency_ms", []string{label}) {
					if len(g.Labels) != 1 {
						t.Errorf("by=%s: a group labelled %v", label, g.Labels)
					}
					got[g.Labels[label]] = g.Count
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("by=%s: %v, want %v", label, got, want)
				}
			}
			// bytes_sent: the second metric of each line, its sums exact.
			for _, s := range c.series {
				g, ok := mapGroupOf(mapWindowGroups(t, base, "bytes_sent", by), map[string]string{"key": s.key, "code": s.code, "method": s.method, "flags": s.flags})
				sum := 0.0
				for _, v := range sent[s] {
					sum += v
				}
				if !ok || g.Count != uint64(s.n) || g.Sum != sum {
					t.Errorf("bytes_sent %+v: %+v, want count %d sum %g", s, g, s.n, sum)
				}
			}
			// POST /v1/events reads the preset's lines too, and names a refused line's field.
			field := map[string]string{"envoy": `"duration":`, "nginx": `"request_time":`}[c.preset]
			badLine := strings.Replace(lines[0], field, `"x`+field[1:], 1)
			resp, err := http.Post(base+"/v1/events", "application/json", strings.NewReader(lines[1]+"\n"+badLine+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			wantFirst := fmt.Sprintf(`"first":{"missing_field":"line 2: no field \"%s\""}`, strings.Trim(field, `":`))
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"accepted":3`) || !strings.Contains(string(body), wantFirst) {
				t.Errorf("POST /v1/events: %d %s\nwant accepted 3 and %s", resp.StatusCode, body, wantFirst)
			}
		})
	}
}

func deref64(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// windowGroups reads /v1/window of metric over 5 minutes grouped by labels, with p95.
func mapWindowGroups(t *testing.T, base, metric string, by []string) []query.WindowGroup {
	t.Helper()
	q := url.Values{"metric": {metric}, "window": {"5m"}, "by": {strings.Join(by, ",")}, "q": {"0.95"}}
	var ans query.WindowResponse
	if err := proctest.GetJSON(base+"/v1/window?"+q.Encode(), &ans); err != nil {
		var se *proctest.StatusError
		if errors.As(err, &se) && (se.Code == http.StatusNotFound || se.Code == http.StatusServiceUnavailable) {
			return nil // no series yet, or serve still joining its group (503 not_ready): the caller polls
		}
		t.Fatal(err)
	}
	return ans.Groups
}

// groupOf finds the group whose labels are want's (a "" value: the label is absent).
func mapGroupOf(groups []query.WindowGroup, want map[string]string) (query.WindowGroup, bool) {
	for _, g := range groups {
		ok := true
		for k, v := range want {
			if g.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			return g, true
		}
	}
	return query.WindowGroup{}, false
}

// TestBacktestEventMap: slide backtest --event-map replays an access log through the
// policies, each line a request of its upstream at its start time, and its events feed the
// usage rules; a line the map refuses stops the replay naming its line and field.
func TestBacktestEventMap(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(pol, []byte(`policies:
  - {name: per-upstream, algorithm: sliding_log, limit: 3, window: 60s}
rules:
  - {name: slow-upstream, metric: latency_ms, agg: p95, window: 1m, max: 500}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for i := range 5 { // five requests to pay within a minute: the last two denied
		log.WriteString(envoyAccessLine(t0.Add(time.Duration(i)*time.Second), "pay", 200, 20) + "\n")
	}
	// cart is slow: its p95 over 500 ms denies its next request by the usage rule.
	log.WriteString(envoyAccessLine(t0.Add(10*time.Second), "cart", 200, 900) + "\n\n")
	log.WriteString(envoyAccessLine(t0.Add(11*time.Second), "cart", 503, 950) + "\n")
	code, out, stderr := runBacktest(t, log.String(), "--policies", pol, "--event-map", "envoy", "--format", "json", "--rings", "latency_ms=10s:30", "-")
	want := `{"policy":"per-upstream","algorithm":"sliding_log","requests":7,"allowed":5,"denied":2,"top_denied":[{"key":"pay","denied":2}],"timeline":[{"start":"2026-12-02T09:00:00Z","allowed":5,"denied":2}]}
{"policy":"slow-upstream","algorithm":"usage p95 of latency_ms","requests":7,"allowed":6,"denied":1,"top_denied":[{"key":"cart","denied":1}],"timeline":[{"start":"2026-12-02T09:00:00Z","allowed":6,"denied":1}]}
`
	if code != 0 || out != want {
		t.Errorf("exit %d\n got %s\nwant %s\nstderr %s", code, out, want, stderr)
	}
	bad := strings.Replace(envoyAccessLine(t0, "pay", 200, 20), `"duration":20,`, "", 1)
	code, _, stderr = runBacktest(t, log.String()+bad+"\n", "--policies", pol, "--event-map", "envoy", "-")
	if wantErr := `line 9: refused as missing_field: no field "duration"`; code != 1 || !strings.Contains(stderr, wantErr) {
		t.Errorf("a refused line: exit %d, %s; want %s", code, stderr, wantErr)
	}
}

// envoyAccessLine is a line of Envoy Gateway's default JSON access log (the fields the envoy
// preset reads, among others).
func envoyAccessLine(at time.Time, cluster string, code, ms int) string {
	return fmt.Sprintf(`{"start_time":"%s","method":"GET","x-envoy-origin-path":"/","protocol":"HTTP/1.1","response_code":%d,"response_flags":"-","bytes_received":0,"bytes_sent":120,"duration":%d,"upstream_cluster":"%s","route_name":"r"}`,
		at.UTC().Format("2006-01-02T15:04:05.000Z"), code, ms, cluster)
}

// TestBacktestReorder: Envoy writes a line when its request ends, stamped with its start, so
// a slow request's line follows faster ones that started after it. Replayed as written the
// log stops at that line with the flag that takes it; with --reorder as long as the slowest
// request it replays as the same log sorted.
func TestBacktestReorder(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(pol, []byte("policies:\n  - {name: per-upstream, algorithm: sliding_log, limit: 3, window: 60s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	type req struct{ start, ms int }
	reqs := []req{{0, 4000}, {1000, 20}, {2000, 30}, {2500, 10}, {3000, 25}, {5000, 10}}
	line := func(r req) string {
		return envoyAccessLine(t0.Add(time.Duration(r.start)*time.Millisecond), "pay", 200, r.ms) + "\n"
	}
	var sorted, asLogged strings.Builder
	for _, r := range reqs {
		sorted.WriteString(line(r))
	}
	for _, i := range []int{1, 2, 3, 4, 0, 5} { // by end: the first request took 4 s
		asLogged.WriteString(line(reqs[i]))
	}
	code, want, stderr := runBacktest(t, sorted.String(), "--policies", pol, "--event-map", "envoy", "--format", "json", "-")
	if code != 0 || !strings.Contains(want, `"allowed":3,"denied":3`) {
		t.Fatalf("sorted: exit %d, %s %s", code, want, stderr)
	}
	code, _, stderr = runBacktest(t, asLogged.String(), "--policies", pol, "--event-map", "envoy", "-")
	if code != 1 || !strings.Contains(stderr, "line 5: request earlier than the previous one") || !strings.Contains(stderr, "--reorder") {
		t.Errorf("as logged, not reordered: exit %d, %s; want line 5 refused and --reorder named", code, stderr)
	}
	code, got, stderr := runBacktest(t, asLogged.String(), "--policies", pol, "--event-map", "envoy", "--format", "json", "--reorder", "5s", "-")
	if code != 0 || got != want {
		t.Errorf("--reorder 5s: exit %d\n got %s\nwant %s\nstderr %s", code, got, want, stderr)
	}
	code, _, stderr = runBacktest(t, asLogged.String(), "--policies", pol, "--event-map", "envoy", "--reorder", "1s", "-")
	if code != 1 || !strings.Contains(stderr, "line 5:") || !strings.Contains(stderr, "reorder window 1s") {
		t.Errorf("--reorder 1s, shorter than the slowest request: exit %d, %s", code, stderr)
	}
}

// TestEventMapDocTrace: docs/sre.md's map of Envoy's log with a traceparent is the envoy
// preset with a trace field, block for block.
func TestEventMapDocTrace(t *testing.T) {
	doc, err := os.ReadFile("../../docs/sre.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "```yaml\n# envoy-traced.yaml"
	_, after, ok := strings.Cut(string(doc), head)
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/sre.md: no %q block", head)
	}
	m, err := parseEventMap([]byte("#"+block), "envoy-traced.yaml") // the rest of the head comment
	if err != nil {
		t.Fatal(err)
	}
	want, _ := event.Preset("envoy")
	if len(m.Metrics) != len(want.Metrics) {
		t.Fatalf("%d blocks, the preset has %d", len(m.Metrics), len(want.Metrics))
	}
	for i, mm := range m.Metrics {
		if mm.Trace != (event.MapTrace{Field: "traceparent"}) {
			t.Errorf("block %d: trace %+v", i, mm.Trace)
		}
		w := want.Metrics[i]
		mm.Trace, mm.Source, w.Source = event.MapTrace{}, "", ""
		sort.Slice(mm.Labels, func(a, b int) bool { return mm.Labels[a].Name < mm.Labels[b].Name })
		sort.Slice(w.Labels, func(a, b int) bool { return w.Labels[a].Name < w.Labels[b].Name })
		if fmt.Sprintf("%+v", mm) != fmt.Sprintf("%+v", w) {
			t.Errorf("block %d:\n got %+v\nwant %+v", i, mm, w)
		}
	}
}
