package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/limiter/usage"
)

func TestParseProduce(t *testing.T) {
	// The line as README.md shows it, with the connection chatter produce may print before.
	out := "some earlier line\nsent 500000 events (250000 requests, 1000 keys, 3 heavy) to events on 127.0.0.1:9092 in 10.002s: 49989 events/s, 33.2 MiB\n"
	got, err := parseProduce(out)
	if err != nil {
		t.Fatal(err)
	}
	want := produceLine{sent: 500000, elapsed: 10002 * time.Millisecond, rate: 49989, volume: "33.2 MiB"}
	if got != want {
		t.Fatalf("parseProduce = %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"",
		"slide produce: no broker of 127.0.0.1:1 answers",
		// the --file form counts records, not generated events
		"sent 3 records (129 B) from events.ndjson to events on 127.0.0.1:9092 in 4ms: 810 records/s",
	} {
		if _, err := parseProduce(bad); !errors.Is(err, errNoProduceLine) {
			t.Errorf("parseProduce(%q) = %v, want errNoProduceLine", bad, err)
		}
	}
}

func TestBrokerAddr(t *testing.T) {
	if got := proctest.BrokerAddr("broker listening on 127.0.0.1:40123 (topic events, 4 partitions, in memory)"); got != "127.0.0.1:40123" {
		t.Fatalf("brokerAddr = %q", got)
	}
	if got := proctest.BrokerAddr("something else"); got != "" {
		t.Fatalf("brokerAddr of a foreign line = %q, want empty", got)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}, {0.001, time.Millisecond}} {
		if got := percentile(d, tc.q); got != tc.want {
			t.Errorf("percentile(1..100 ms, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(empty) = %v, want 0", got)
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("percentile(one value) = %v, want 7", got)
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 12345678: "12,345,678", -1234: "-1,234", 100000: "100,000"} {
		if got := comma(n); got != want {
			t.Errorf("comma(%d) = %q, want %q", n, got, want)
		}
	}
	for b, want := range map[int64]string{0: "0 MiB", 40 << 20: "40 MiB", 40<<20 + 1<<19: "41 MiB", 40<<20 + 1<<19 - 1: "40 MiB"} {
		if got := mib(b); got != want {
			t.Errorf("mib(%d) = %q, want %q", b, got, want)
		}
	}
	for d, want := range map[time.Duration]string{410 * time.Microsecond: "0.410 ms", 2300 * time.Microsecond: "2.30 ms", 12345 * time.Microsecond: "12.3 ms", 687 * time.Millisecond: "687 ms"} {
		if got := ms(d); got != want {
			t.Errorf("ms(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRSSBound(t *testing.T) {
	r := &result{rssStart: 40 << 20, series: 2000}
	r.bound = rssBound(r.rssStart, r.series)
	if want := int64(40<<20 + 2000*32<<10 + 128<<20); r.bound != want {
		t.Fatalf("rssBound = %d, want %d", r.bound, want)
	}
	if got, want := r.boundFormula(), "231 MiB = start 40 MiB + 2,000 series × 32 KiB + 128 MiB"; got != want {
		t.Fatalf("boundFormula = %q, want %q", got, want)
	}
}

func TestClassifyWindow(t *testing.T) {
	ok := []byte(`{"metric":"latency_ms","key":"tenant-7","window":"5m","from":1,"to":2,"series":1,"count":3,"sum":1}` + "\n")
	notFound := []byte(`{"error":{"code":"not_found","message":"no series metric=\"latency_ms\" key=\"tenant-7\""}}`)
	for _, tc := range []struct {
		code int
		body []byte
		seen bool
		want windowOutcome
	}{
		{200, ok, false, windowOK},
		{200, ok, true, windowOK},
		{404, notFound, false, windowNotYet},
		{404, notFound, true, windowVanished},
		{200, []byte(`{"metric":"cost","key":"tenant-7","count":3}`), false, windowBadBody},
		{200, []byte(`{"metric":"latency_ms","key":"tenant-7"}`), false, windowBadBody},
		{503, []byte(`{"error":{"code":"not_ready"}}`), false, windowBadStatus},
		{500, nil, true, windowBadStatus},
		{400, nil, false, windowBadStatus},
	} {
		if got := classifyWindow(tc.code, tc.body, tc.seen); got != tc.want {
			t.Errorf("classifyWindow(%d, %.30q, seen=%v) = %v, want %v", tc.code, tc.body, tc.seen, got, tc.want)
		}
	}
}

func TestClassifyAllow(t *testing.T) {
	allowed := []byte(`{"allowed":true,"policy":"api","limit":10,"remaining":9,"retry_after_ms":0,"reset_after_ms":200}`)
	denied := []byte(`{"allowed":false,"policy":"api","limit":10,"remaining":0,"retry_after_ms":4,"reset_after_ms":1804}`)
	for _, tc := range []struct {
		code int
		body []byte
		good bool
	}{
		{200, allowed, true},
		{429, denied, true},
		{200, denied, false},
		{429, allowed, false},
		{500, allowed, false},
		{400, []byte(`{"error":{"code":"bad_parameter"}}`), false},
	} {
		if got := classifyAllow(tc.code, tc.body); (got == "") != tc.good {
			t.Errorf("classifyAllow(%d, %s) = %q, want good=%v", tc.code, tc.body, got, tc.good)
		}
	}
}

// The policy file and every request body the allow workers send are valid for slide's own
// parser: a typo would turn the whole allow load into 400s.
func TestPoliciesParse(t *testing.T) {
	pols, rules, err := usage.ParseFile([]byte(policies), "soak-policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pols {
		names[p.Name] = true
	}
	for _, r := range rules {
		names[r.Name] = true
	}
	for _, body := range allowBodies {
		for _, want := range []string{"api", "window", "quota", "shed-slow"} {
			if strings.Contains(body, `"`+want+`"`) && !names[want] {
				t.Errorf("body %s names %q, which the policy file lacks", body, want)
			}
		}
	}
	if len(names) != 4 {
		t.Errorf("policy file defines %v, want api, window, quota and shed-slow", names)
	}
	if got := allowKeys(1000); got != 100 {
		t.Errorf("allowKeys(1000) = %d, want 100", got)
	}
	if got := allowKeys(5); got != 1 {
		t.Errorf("allowKeys(5) = %d, want 1", got)
	}
}

func TestSummarizeLog(t *testing.T) {
	out := `time=2026-11-30T10:12:07.718Z level=WARN msg="ingest: fetching" partition=2 offset=0 err="x"
time=2026-11-30T10:12:07.719Z level=WARN msg="ingest: fetching" partition=1 offset=0 err="x"
time=2026-11-30T10:12:08.000Z level=ERROR msg=stopping err="boom"
time=2026-11-30T10:12:08.000Z level=INFO msg=stopped
not a log line
`
	s := summarizeLog(out)
	if s.warnings != 2 || s.errors != 1 {
		t.Fatalf("summarizeLog: %d warnings, %d errors; want 2, 1", s.warnings, s.errors)
	}
	if got, want := s.String(), `2 warnings, 1 errors: 2× "WARN ingest: fetching", 1× "ERROR stopping"`+
		"\n  first: "+strings.Split(out, "\n")[0]+"\n  first: "+strings.Split(out, "\n")[2]; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if got := summarizeLog("").String(); got != "no warnings or errors" {
		t.Fatalf("empty log: %q", got)
	}
}

func TestKeptUp(t *testing.T) {
	if !keptUp(100_000, 90_000) || !keptUp(100_000, 99_900) {
		t.Error("90% and more of the target is keeping up")
	}
	if keptUp(400_000, 259_761) {
		t.Error("65% of the target is falling behind")
	}
}

func TestConfigValidate(t *testing.T) {
	good := config{duration: time.Minute, keys: 1000, windowWorkers: 4, allowWorkers: 4, partitions: 4, maxProducerRSS: 1 << 30}
	if err := good.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mutate := range map[string]func(*config){
		"duration past the window": func(c *config) { c.duration = 5 * time.Minute },
		"duration too short":       func(c *config) { c.duration = time.Second },
		"no keys":                  func(c *config) { c.keys = 0 },
		"negative workers":         func(c *config) { c.allowWorkers = -1 },
		"negative rate":            func(c *config) { c.rate = -1 },
		"no partitions":            func(c *config) { c.partitions = 0 },
		"no producer guard":        func(c *config) { c.maxProducerRSS = 0 },
	} {
		c := good
		mutate(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: validate accepted %+v", name, c)
		}
	}
}

// passing is a result that keeps every promise; the checks test breaks one at a time.
func passing() *result {
	first := time.UnixMilli(1_796_030_300_000)
	r := &result{
		cfg:        config{duration: time.Minute},
		runs:       []produceRun{{label: "main run", target: 300_000, out: produceLine{sent: 1000, rate: 299_000, elapsed: time.Minute}}},
		produced:   1000,
		firstEvent: first,
		drained:    true,
		window:     newEndpointStats(),
		allow:      newEndpointStats(),
		windowCounts: []metricCount{
			{metric: "latency_ms", count: 500, series: 10, from: first.UnixMilli() - 10_000},
			{metric: "cost", count: 500, series: 10, from: first.UnixMilli() - 60_000},
		},
		eventsTotal: 1000,
		series:      20, seriesSeen: 20,
		rssStart: 40 << 20, rssWarm: 60 << 20, rssPeak: 70 << 20, rssEnd: 65 << 20,
	}
	r.bound = rssBound(r.rssStart, r.series)
	r.window.byCode[200] = 10
	r.allow.byCode[200], r.allow.byCode[429] = 5, 5
	return r
}

func TestChecks(t *testing.T) {
	if f := passing().checks(); len(f) != 0 {
		t.Fatalf("a run that keeps every promise fails: %q", f)
	}
	for _, tc := range []struct {
		name   string
		break_ func(*result)
		want   string
	}{
		{"window errors", func(r *result) { r.window.failures = 1 }, "/v1/window: 1 failed"},
		{"allow errors", func(r *result) { r.allow.failures = 2 }, "/v1/allow: 2 failed"},
		{"lost event in the windows", func(r *result) { r.windowCounts[1].count-- }, "produced 1,000, /v1/window counts 999 (-1)"},
		{"extra event in the counter", func(r *result) { r.eventsTotal++ }, "slide_ingest_events_total 1,001 (+1)"},
		{"rejected", func(r *result) { r.rejected, r.rejectedBy = 3, map[string]int64{"late": 3} }, "slide_ingest_rejected_total 3, want 0: map[late:3]"},
		{"expired", func(r *result) { r.expired = 1 }, "slide_ingest_expired_total 1"},
		{"not drained", func(r *result) { r.drained = false }, "not drained"},
		{"window shorter than the run", func(r *result) { r.windowCounts[0].from = r.firstEvent.UnixMilli() + 1 }, "the run outlived the window"},
		{"too many series", func(r *result) { r.seriesSeen = 21 }, "slide_ingest_series 21"},
		{"peak past the bound", func(r *result) { r.rssPeak = r.bound + 1 }, "peak RSS"},
		{"end past the bound", func(r *result) { r.rssEnd, r.rssPeak = r.bound+1, r.bound+1 }, "end RSS"},
		{"unclean exit", func(r *result) { r.serveStopErr = errors.New("exit status 1") }, "did not exit cleanly"},
		{"error logged", func(r *result) { r.serveLog.errors = 1 }, "level ERROR"},
	} {
		r := passing()
		tc.break_(r)
		f := r.checks()
		if len(f) == 0 || !strings.Contains(strings.Join(f, "\n"), tc.want) {
			t.Errorf("%s: checks = %q, want a line containing %q", tc.name, f, tc.want)
		}
	}
}

func TestPrint(t *testing.T) {
	var b bytes.Buffer
	if fails := passing().print(&b); len(fails) != 0 {
		t.Fatalf("print of a passing run returned %q", fails)
	}
	out := b.String()
	for _, want := range []string{
		"soak 1m0s: produced 1,000 events (299,000/s), consumed all, max lag 0, drained in 0.0 s\n",
		"/v1/window: 10 requests",
		"/v1/allow:  10 requests",
		"allowed (200): 5, denied (429): 5; errors 0",
		"counts: produced 1,000; /v1/window key=* 5m: latency_ms 500 + cost 500 = 1,000; slide_ingest_events_total 1,000; rejected 0, expired 0; series 20 of 20\n",
		"RSS: start 40 MiB, after warm-up 60 MiB, peak 70 MiB, end 65 MiB (bound 169 MiB = start 40 MiB + 20 series × 32 KiB + 128 MiB)\n",
		"\nPASS\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	r := passing()
	r.eventsTotal = 999
	b.Reset()
	if fails := r.print(&b); len(fails) != 1 || !strings.Contains(b.String(), "FAIL: lost or extra events") || strings.Contains(b.String(), "PASS") {
		t.Fatalf("print of a run that lost an event:\n%s", b.String())
	}
}

func TestEndpointStatsMerge(t *testing.T) {
	a, b := newEndpointStats(), newEndpointStats()
	a.latency(time.Millisecond)
	a.ok(200)
	a.notYet = 2
	for i := range 7 {
		b.fail("GET x", "boom "+string(rune('a'+i)))
	}
	b.ok(429)
	a.merge(b)
	if got := a.requests(); got != 1+2+7+1 {
		t.Fatalf("requests = %d, want 11", got)
	}
	if a.failures != 7 || len(a.examples) != maxExamples || a.byCode[429] != 1 || len(a.lat) != 1 {
		t.Fatalf("merged stats wrong: %+v", a)
	}
}
