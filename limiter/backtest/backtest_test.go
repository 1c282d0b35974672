package backtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
)

func replayLog(t *testing.T, cfg Config, log string) ([]Report, error) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = ReadLog(strings.NewReader(log), func(req Request) error { return r.Replay(context.Background(), req) })
	return r.Reports(), err
}

var perMinute = []limiter.Policy{
	{Name: "fixed", Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Minute},
	{Name: "counter", Algorithm: limiter.SlidingCounter, Limit: 100, Window: time.Minute},
	{Name: "log", Algorithm: limiter.SlidingLog, Limit: 100, Window: time.Minute},
}

// The first article's boundary burst: 100 requests at 10:00:59.9 and 100 at 10:01:00.1 with
// 100 per minute. The fixed window admits all 200, the sliding counter 101, the log 100.
func TestBoundaryBurst(t *testing.T) {
	var b strings.Builder
	b.WriteString("ts,key\n")
	for i := 0; i < 100; i++ {
		b.WriteString("2025-11-30T10:00:59.900Z,u42\n")
	}
	for i := 0; i < 100; i++ {
		b.WriteString("2025-11-30T10:01:00.100Z,u42\n")
	}
	reps, err := replayLog(t, Config{Policies: perMinute}, b.String())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{"fixed": {200, 0}, "counter": {101, 99}, "log": {100, 100}}
	for _, r := range reps {
		if got := [2]int64{r.Allowed, r.Denied}; got != want[r.Policy] {
			t.Errorf("%s: allowed/denied %v, want %v", r.Policy, got, want[r.Policy])
		}
	}
	// The log's 100 denials are all at 10:01:00.1: one timeline bucket, one key.
	lg := reps[2]
	if len(lg.Timeline) != 1 || lg.Timeline[0].Start != time.Date(2025, 11, 30, 10, 1, 0, 0, time.UTC) ||
		lg.Timeline[0].Denied != 100 || lg.Timeline[0].Allowed != 0 {
		t.Errorf("timeline %+v", lg.Timeline)
	}
	if len(lg.TopDenied) != 1 || lg.TopDenied[0] != (KeyCount{Key: "u42", Denied: 100}) {
		t.Errorf("top denied %+v", lg.TopDenied)
	}
}

// The article's sliding log in Redis, limit 3 per minute, four requests: three admitted, the
// fourth denied with Retry-After 59,866 ms (it came 134 ms after the first).
func TestSlidingLogExample(t *testing.T) {
	type out struct {
		allowed          bool
		remaining, retry int64
	}
	var got []out
	cfg := Config{
		Policies: []limiter.Policy{{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute}},
		OnDecision: func(_ Request, _ string, d limiter.Decision, _ error) {
			got = append(got, out{d.Allowed, d.Remaining, d.RetryAfter.Milliseconds()})
		},
	}
	log := `{"ts":1764496800000,"key":"u42"}
{"ts":1764496800040,"key":"u42"}
{"ts":1764496800090,"key":"u42"}
{"ts":1764496800134,"key":"u42"}
`
	reps, err := replayLog(t, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	want := []out{{true, 2, 0}, {true, 1, 0}, {true, 0, 0}, {false, 0, 59866}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if reps[0].Allowed != 3 || reps[0].Denied != 1 {
		t.Fatalf("report %+v", reps[0])
	}
}

func TestReadLogErrors(t *testing.T) {
	one := Config{Policies: perMinute[:1]}
	cases := []struct{ name, log, want string }{
		{"unsorted", "ts,key\n2000,a\n1000,a\n", "line 3: request earlier than the previous one"},
		{"bad ts", "ts,key\n2000,a\nyesterday,a\n", `line 3: ts "yesterday"`},
		{"no key column", "ts,user\n1,a\n", "needs ts and key columns"},
		{"unknown policy", "ts,key,policy\n1,a,nope\n", `line 2: unknown policy "nope" (policies: [fixed])`},
		{"bad cost", "ts,key,cost\n1,a,x\n", `line 2: cost "x" is not an integer`},
		{"ndjson no key", `{"ts":1}` + "\n", `line 1: no "key"`},
		{"ndjson broken", `{"ts":1,"key":"a"}` + "\n{\n", "line 2:"},
		// Spans, OTLP logs or an access log replayed as a request log: the refusal names the flag.
		{"otlp_json spans", `{"resourceSpans":[{"resource":{},"scopeSpans":[]}]}` + "\n", `line 1: no "ts" (spans? replay them with --event-format otlp_json)`},
		{"zipkin_json spans", `[{"traceId":"5b8efff798038103","id":"eee19b7ec3c1b174"}]` + "\n", `(spans? replay them with --event-format zipkin_json)`},
		{"otlp logs", `{"resourceLogs":[]}` + "\n", `line 1: no "ts" (OTLP logs? replay the access log's JSON lines themselves with --event-map)`},
		{"access log", `{"start_time":"2026-12-02T09:05:00.123Z","duration":3}` + "\n", `line 1: no "ts" (an access log? --event-map reads it)`},
		{"ndjson long line", `{"ts":1,"key":"a"}` + "\n" + `{"ts":2,"key":"` + strings.Repeat("k", maxLogLine) + "\"}\n", "line 2: longer than 1048576 bytes"},
		{"long line", "ts,key\n1,a\n2," + strings.Repeat("k", maxLogLine) + "\n", "line 3: longer than 1048576 bytes"},
		{"long header", "ts,key," + strings.Repeat("x", maxLogLine) + "\n", "header: line 1: longer than 1048576 bytes"},
		{"long quoted record", "ts,key\n1,a\n2,\"" + strings.Repeat("k\n", maxLogLine/2) + "\"\n", "line 3: longer than 1048576 bytes"},
		{"long record after a quoted one", "ts,key,note\n1,a,\"x\ny\"\n2,b," + strings.Repeat("k", maxLogLine) + "\n", "line 4: longer than 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := replayLog(t, one, c.log)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	// Costs and per-request policies are honoured.
	reps, err := replayLog(t, Config{Policies: perMinute}, "ts,key,cost,policy\n1000,a,60,fixed\n1001,a,60,fixed\n1002,a,101,log\n1003,b,,\n")
	if err != nil {
		t.Fatal(err)
	}
	if r := reps[0]; r.Requests != 3 || r.Allowed != 2 || r.Denied != 1 {
		t.Errorf("fixed %+v", r)
	}
	if r := reps[2]; r.Requests != 2 || r.OverQuota != 1 || r.Denied != 1 {
		t.Errorf("log %+v", r)
	}
}

// decisionJSON is the body of POST /v1/allow.
type decisionJSON struct {
	Allowed      bool  `json:"allowed"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMS int64 `json:"retry_after_ms"`
}

// The replay agrees with the live limiter: the same random request sequence (five
// algorithms, a few keys, costs, bursts and gaps) sent through POST /v1/allow of a real
// HTTP server whose clock is set to each request's time gives the same decision, remaining
// and Retry-After for every request and policy.
func TestAgreesWithLiveLimiter(t *testing.T) {
	policies := []limiter.Policy{
		{Name: "fw", Algorithm: limiter.FixedWindow, Limit: 20, Window: 10 * time.Second},
		{Name: "sl", Algorithm: limiter.SlidingLog, Limit: 15, Window: 10 * time.Second},
		{Name: "sc", Algorithm: limiter.SlidingCounter, Limit: 20, Window: 10 * time.Second},
		{Name: "tb", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 2},
		{Name: "lb", Algorithm: limiter.LeakyBucket, Capacity: 5, LeakPerSecond: 3},
	}
	rng := rand.New(rand.NewPCG(16, 16))
	var reqs []Request
	now := time.Date(2025, 11, 30, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 800; i++ {
		switch rng.IntN(10) {
		case 0:
			now = now.Add(time.Duration(rng.IntN(8000)) * time.Millisecond) // a gap
		case 1, 2, 3:
			now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		} // else: the same instant (a burst)
		reqs = append(reqs, Request{Time: now, Key: fmt.Sprintf("k%d", rng.IntN(4)), Cost: int64(1 + rng.IntN(3)), Line: int64(i + 1)})
	}
	type key struct {
		line   int64
		policy string
	}
	replayed := map[key]decisionJSON{}
	r, err := New(Config{Policies: policies, OnDecision: func(req Request, p string, d limiter.Decision, err error) {
		if err != nil {
			t.Errorf("line %d %s: %v", req.Line, p, err)
		}
		// POST /v1/allow rounds retry_after_ms up: so must the comparison.
		retry := (d.RetryAfter + time.Millisecond - 1) / time.Millisecond
		replayed[key{req.Line, p}] = decisionJSON{d.Allowed, d.Remaining, int64(retry)}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range reqs {
		if err := r.Replay(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	clock := reqs[0].Time
	svc, err := limiter.NewService(limiter.Config{Policies: policies,
		Clock: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(limithttp.AllowHandler(svc))
	defer srv.Close()
	client := srv.Client()
	var live Report
	for _, req := range reqs {
		mu.Lock()
		clock = req.Time
		mu.Unlock()
		for _, p := range policies {
			body := fmt.Sprintf(`{"policy":%q,"key":%q,"cost":%d}`, p.Name, req.Key, req.Cost)
			resp, err := client.Post(srv.URL+"/v1/allow", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got decisionJSON
			if err := json.Unmarshal(raw, &got); err != nil || (resp.StatusCode != 200 && resp.StatusCode != 429) {
				t.Fatalf("line %d %s: status %d %s", req.Line, p.Name, resp.StatusCode, raw)
			}
			if got.Allowed != (resp.StatusCode == 200) {
				t.Fatalf("status %d but allowed %v", resp.StatusCode, got.Allowed)
			}
			if want := replayed[key{req.Line, p.Name}]; got != want {
				t.Fatalf("line %d (%s, key %s, cost %d) policy %s: live %+v, replay %+v",
					req.Line, req.Time.Format(time.RFC3339Nano), req.Key, req.Cost, p.Name, got, want)
			}
			if p.Name == "sl" {
				live.Requests++
				if got.Allowed {
					live.Allowed++
				} else {
					live.Denied++
				}
			}
		}
	}
	sl := r.Reports()[1]
	if sl.Allowed != live.Allowed || sl.Denied != live.Denied || sl.Denied == 0 || sl.Allowed == 0 {
		t.Fatalf("sliding log: replay %d/%d, live %d/%d (both outcomes must occur)", sl.Allowed, sl.Denied, live.Allowed, live.Denied)
	}
	t.Logf("%d requests × %d policies agree; sliding_log allowed %d, denied %d", len(reqs), len(policies), sl.Allowed, sl.Denied)
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("no policies accepted")
	}
	p := perMinute[0]
	if _, err := New(Config{Policies: []limiter.Policy{p, p}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate policy: %v", err)
	}
	bad := p
	bad.Limit = 0
	if _, err := New(Config{Policies: []limiter.Policy{bad}}); err == nil {
		t.Fatal("invalid policy accepted")
	}
	if _, err := New(Config{Policies: perMinute, Bucket: time.Microsecond}); err == nil {
		t.Fatal("sub-millisecond bucket accepted")
	}
}

// A redis or cluster policy replays on the memory backend with its algorithm, so the fields
// that only those backends read (timeout, on_backend_error: local) must not stop the replay:
// platform.md's own policies file (login: backend redis, timeout 50ms) was refused with
// "timeout: applies only to backend redis or cluster", about a policy that is one.
func TestReplaysRedisAndClusterPolicyFields(t *testing.T) {
	cfg := Config{Policies: []limiter.Policy{
		{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute,
			Backend: limiter.BackendRedis, OnBackendError: limiter.FailClosed, Timeout: 50 * time.Millisecond},
		{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 2, RefillPerSecond: 1,
			Backend: limiter.BackendCluster, OnBackendError: limiter.FailLocal, Timeout: 50 * time.Millisecond},
	}}
	reps, err := replayLog(t, cfg, "ts,key\n1000,u\n1001,u\n1002,u\n1003,u\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{"login": {3, 1}, "api": {2, 2}}
	for _, r := range reps {
		if got := [2]int64{r.Allowed, r.Denied}; got != want[r.Policy] {
			t.Errorf("%s: allowed/denied %v, want %v", r.Policy, got, want[r.Policy])
		}
	}
}
