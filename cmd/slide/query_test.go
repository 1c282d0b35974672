package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// queryServer serves the query API over a store holding three tenants' latencies at a fixed
// instant, 2025-11-30T08:04:05Z.
func queryServer(t *testing.T) string {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// One event per 10 s slot from 08:00:00 to 08:04:00 (25 slots) per tenant, value
	// base + j%10: tenant-1 the slowest (30..39), tenant-3 the busiest (two events a slot).
	t0 := time.Date(2025, 11, 30, 8, 0, 0, 0, time.UTC)
	now := t0.Add(4*time.Minute + 5*time.Second)
	for i, tenant := range []string{"tenant-1", "tenant-2", "tenant-3"} {
		for j := range 25 {
			ts := t0.Add(time.Duration(j) * 10 * time.Second).UnixMilli()
			ev := window.Event{TS: ts, Metric: "latency_ms", Key: tenant, Value: float64(10*(3-i) + j%10)}
			if tenant == "tenant-3" {
				ev.Count = 2
			}
			if err := st.ObserveAt(now.UnixMilli(), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv, err := query.New(query.Config{Store: st, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

func runQuery(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := cmdQuery(context.Background(), args, stdio{strings.NewReader(""), &out, &errb})
	return out.String(), errb.String(), err
}

func TestQueryWindowTable(t *testing.T) {
	addr := queryServer(t)
	out, _, err := runQuery(t, "window", "--addr", addr, "--metric", "latency_ms", "--key", "tenant-1", "--window", "1m")
	if err != nil {
		t.Fatal(err)
	}
	// Slots 08:03:10..08:04:00 hold j = 19..24: 39, 30, 31, 32, 33, 34. Ranks floor(q × 5):
	// p50 is 32 (the sketch says 31.7, within 1%), p95 and p99 are 34 (34.31). The rate
	// divides by the 55 s elapsed since 08:03:10.
	want := `latency_ms tenant-1 over 1m, [2025-11-30T08:03:10Z, 08:04:10Z)
count    6
sum      199
avg      33.17
min      30
max      39
rate/s   0.1091
elapsed  55s
p50      31.7
p95      34.31
p99      34.31
`
	if out != want {
		t.Fatalf("window table:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = runQuery(t, "window", "--addr", addr, "--metric", "latency_ms", "--key", "tenant-*", "--window", "1m", "--q", "p50")
	if err != nil || !strings.Contains(out, "series   3\n") || !strings.Contains(out, "count    24\n") {
		t.Fatalf("glob window: %v\n%s", err, out)
	}
}

func TestQueryTopTable(t *testing.T) {
	addr := queryServer(t)
	out, _, err := runQuery(t, "top", "--addr", addr, "--metric", "latency_ms", "--by", "p95", "--window", "5m", "--k", "2")
	if err != nil {
		t.Fatal(err)
	}
	// 5m holds all 25 events of each tenant: tenant-1 has 30..34 three times and 35..39
	// twice, so p50 (rank 12) is 34, p95 (rank 22) 38 and p99 (rank 23) 39, printed as the
	// sketch's estimates within 1%; tenant-3 (values 10..19) ranks last. 25 events over the
	// 295 s elapsed since 07:59:10 is 0.08475/s.
	want := `latency_ms: top 2 of 3 series by p95 over 5m, [2025-11-30T07:59:10Z, 08:04:10Z)
  #       key  count   rate/s    p50    p95    p99  max
  1  tenant-1     25  0.08475  34.31  37.88  38.63   39
  2  tenant-2     25  0.08475     24  28.16  28.73   29
`
	if out != want {
		t.Fatalf("top table:\n%s\nwant:\n%s", out, want)
	}
	// By sum, a column of its own: tenant-1 25 × 30 + 100 = 850 beats tenant-3's 2 × 350.
	out, _, err = runQuery(t, "top", "--addr", addr, "--metric", "latency_ms", "--by", "sum", "--k", "1", "--q", "0.5")
	if err != nil || !strings.Contains(out, "key  sum  count   rate/s    p50  max\n") || !strings.Contains(out, "1  tenant-1  850     25") {
		t.Fatalf("top by sum:\n%s (%v)", out, err)
	}
}

func TestQuerySeriesAndMetrics(t *testing.T) {
	addr := queryServer(t)
	out, _, err := runQuery(t, "series", "--addr", addr, "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "metric      key\nlatency_ms  tenant-1\nlatency_ms  tenant-2\nmore: --cursor ") {
		t.Fatalf("series page:\n%s", out)
	}
	out, _, err = runQuery(t, "series", "--addr", addr, "--limit", "2", "--all")
	if err != nil || out != "metric      key\nlatency_ms  tenant-1\nlatency_ms  tenant-2\nlatency_ms  tenant-3\n" {
		t.Fatalf("series --all:\n%s (%v)", out, err)
	}
	out, _, err = runQuery(t, "metrics", "--addr", addr)
	if err != nil || out != "metric      series  slot  slots  retention\nlatency_ms  3       10s   30     5m\n" {
		t.Fatalf("metrics:\n%s (%v)", out, err)
	}
}

func TestQueryJSONIsTheAPIAnswer(t *testing.T) {
	addr := queryServer(t)
	out, _, err := runQuery(t, "window", "--json", "--addr", strings.TrimPrefix(addr, "http://"), "--metric", "latency_ms", "--key", "tenant-2", "--window", "10s", "--q", "0.5")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metric":"latency_ms","key":"tenant-2","window":"10s","from":1764489840000,"to":1764489850000,"series":1,"count":1,"sum":24,"avg":24,"min":24,"max":24,"rate_per_s":0.2,"elapsed_s":5,"quantiles":{"0.5":24}}` + "\n"
	if out != want {
		t.Fatalf("--json:\n%s\nwant\n%s", out, want)
	}
}

func TestQueryErrors(t *testing.T) {
	addr := queryServer(t)
	_, _, err := runQuery(t, "window", "--addr", addr, "--metric", "latency_ms", "--key", "nobody")
	var apiErr *apiError
	if !errors.As(err, &apiErr) || apiErr.status != 404 || !strings.Contains(err.Error(), `key="nobody"`) {
		t.Fatalf("unknown series: %v", err)
	}
	_, _, err = runQuery(t, "window", "--addr", addr, "--metric", "latency_ms", "--key", "tenant-1", "--window", "7s")
	if err == nil || !strings.Contains(err.Error(), `parameter "window"`) || !strings.Contains(err.Error(), "HTTP 400 bad_parameter") {
		t.Fatalf("bad window: %v", err)
	}
	for _, args := range [][]string{
		{"window", "--metric", "latency_ms"},
		{"top"},
		{"frobnicate"},
		{},
		{"window", "--metric", "m", "--key", "k", "extra"},
		{"metrics", "--addr", "ftp://x"},
		{"series", "--limit", "many"},
	} {
		if _, _, err := runQuery(t, args...); !errors.Is(err, errUsage) || err.Error() == "usage" && len(args) > 0 {
			t.Errorf("%q: err %v; want a usage error that says what is wrong", args, err)
		}
	}
	_, _, err = runQuery(t, "metrics", "--addr", "http://127.0.0.1:1", "--timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "is slide serve running") {
		t.Fatalf("no server: %v", err)
	}
	// An answer past the bound is said to be, not cut and reported as broken JSON.
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"metrics":["`))
		w.Write(bytes.Repeat([]byte("m"), maxAnswerBytes))
		w.Write([]byte(`"]}`))
	}))
	defer huge.Close()
	if _, _, err := runQuery(t, "metrics", "--addr", huge.URL); err == nil || !strings.Contains(err.Error(), "answer of /v1/metrics: over 64 MiB") {
		t.Fatalf("huge answer: %v", err)
	}
}

func TestNormalizeAddr(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080": "http://127.0.0.1:8080", "127.0.0.1:9": "http://127.0.0.1:9",
		":8080": "http://127.0.0.1:8080", "https://slide.internal/": "https://slide.internal",
	} {
		if got, err := normalizeAddr(in); err != nil || got != want {
			t.Errorf("normalizeAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := normalizeAddr("ftp://x"); err == nil {
		t.Error("ftp accepted")
	}
}

func TestPname(t *testing.T) {
	for in, want := range map[string]string{"0.5": "p50", "0.95": "p95", "0.999": "p99.9", "0.05": "p5", "1": "p100", "0": "p0"} {
		if got := pname(in); got != want {
			t.Errorf("pname(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestQueryTablesEscapeOddKeys: keys no door admits any more (an old store, a peer) are
// printed escaped by the tables, and --json writes their odd characters as \u escapes of
// the same JSON string, so none reaches the terminal raw.
func TestQueryTablesEscapeOddKeys(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 11, 30, 8, 0, 0, 0, time.UTC).UnixMilli()
	odd := []string{"csi\u009b31m", "rlo\u202etxt.exe", "esc\x1b[2J", "tab\tx", "t\xff", "ok-é"}
	for _, k := range odd {
		if err := st.ObserveAt(now, window.Event{TS: now, Metric: "latency_ms", Key: k, Value: 1}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := query.New(query.Config{Store: st, Now: func() time.Time { return time.UnixMilli(now) }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	out, _, err := runQuery(t, "series", "--addr", ts.URL, "--metric", "latency_ms")
	want := "metric      key\n" +
		"latency_ms  \"csi\\u009b31m\"\n" +
		"latency_ms  \"esc\\x1b[2J\"\n" +
		"latency_ms  ok-é\n" +
		"latency_ms  \"rlo\\u202etxt.exe\"\n" +
		"latency_ms  \"tab\\tx\"\n" +
		"latency_ms  \"t\ufffd\"\n" // the API's JSON carries invalid UTF-8 as U+FFFD, quoted to show it was not the key
	if err != nil || out != want {
		t.Fatalf("series table:\n%s (%v)\nwant:\n%s", out, err, want)
	}
	out, _, err = runQuery(t, "top", "--addr", ts.URL, "--metric", "latency_ms", "--k", "10")
	if err != nil || !strings.Contains(out, `"rlo\u202etxt.exe"`) || strings.ContainsAny(out, "\u009b\u202e\x1b\t") {
		t.Fatalf("top table:\n%q (%v)", out, err)
	}
	out, _, err = runQuery(t, "series", "--json", "--addr", ts.URL, "--metric", "latency_ms")
	if err != nil || !strings.Contains(out, `"key":"csi\u009b31m"`) || !strings.Contains(out, `"key":"rlo\u202etxt.exe"`) || strings.ContainsAny(out, "\u009b\u202e\x1b") {
		t.Fatalf("--json:\n%q (%v)", out, err)
	}
	if !strings.Contains(out, `"key":"ok-é"`) {
		t.Fatalf("--json escaped a printable key:\n%s", out)
	}
}

func TestEscapeOdd(t *testing.T) {
	for in, want := range map[string]string{
		`{"k":"plain"}`:             `{"k":"plain"}`,
		`{"k":"é日本"}`:               `{"k":"é日本"}`,
		"{\"k\":\"a\u0085b\"}":      `{"k":"a\u0085b"}`,
		"{\"k\":\"\u2066x\u2069\"}": `{"k":"\u2066x\u2069"}`,
		"{\"k\":\"tag\U000E0041\"}": `{"k":"tag\udb40\udc41"}`, // a supplementary rune: a surrogate pair
	} {
		got := string(escapeOdd([]byte(in)))
		var a, b any
		if got != want || json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal([]byte(in), &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("escapeOdd(%q) = %q, want %q, the same JSON value", in, got, want)
		}
	}
}

// TestLogsEscapeOddKeys: a log line of serve or broker shows a hostile key as its escapes.
func TestLogsEscapeOddKeys(t *testing.T) {
	var b bytes.Buffer
	log := newLogger(&b, slog.LevelInfo)
	log.Info("refused", "key", "csi\u009b31m", "metric", "rlo\u202ex", "other", "esc\x1b[2J\nnext", "bytes", "t\xff")
	out := b.String()
	for _, want := range []string{`key="csi\u009b31m"`, `metric="rlo\u202ex"`, `other="esc\x1b[2J\nnext"`, `bytes="t\xff"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log line %q lacks %s", out, want)
		}
	}
	if strings.ContainsAny(out[:len(out)-1], "\u009b\u202e\x1b\n\xff") {
		t.Errorf("log line holds a raw odd character: %q", out)
	}
}

// A SLIDE_ADDR that is already a URL (meant for slide query, which reads SLIDE_URL) is
// suggested as SLIDE_URL as it is: before, the hint read SLIDE_URL=http://http://x:1.
func TestWhereHintKeepsAURLsScheme(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{":8081", "e.g. SLIDE_URL=http://127.0.0.1:8081"},
		{"10.0.0.5:8080", "e.g. SLIDE_URL=http://10.0.0.5:8080"},
		{"http://slide:8080", "e.g. SLIDE_URL=http://slide:8080"},
		{"https://slide.example", "e.g. SLIDE_URL=https://slide.example"},
	} {
		fs := flag.NewFlagSet("query", flag.ContinueOnError)
		fs.String("addr", "", "")
		got := whereHint(fs, func(k string) (string, bool) { return tc.addr, k == "SLIDE_ADDR" })
		if !strings.HasSuffix(got, tc.want) {
			t.Errorf("SLIDE_ADDR=%s: hint %q, want it to end in %q", tc.addr, got, tc.want)
		}
	}
}

// An exported SLIDE_ADDR (serve's listen address, SLIDE_ADDR=:8081 slide serve) is not where
// slide query asks; when it dials the default instead and nothing answers, it says so and
// names the variable it reads. Before, it said only "see --addr".
func TestQueryNamesSLIDE_ADDRWhenTheDefaultFails(t *testing.T) {
	defer func(u string) { defaultQueryURL = u }(defaultQueryURL)
	defaultQueryURL = "http://127.0.0.1:1" // nothing listens on port 1
	t.Setenv("SLIDE_URL", "")
	os.Unsetenv("SLIDE_URL")
	t.Setenv("SLIDE_ADDR", ":8081")
	_, _, err := runQuery(t, "metrics", "--timeout", "2s")
	want := "SLIDE_ADDR=:8081 is serve's listen address; slide query reads --addr or SLIDE_URL, e.g. SLIDE_URL=http://127.0.0.1:8081"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("default address failing with SLIDE_ADDR set: %v\nwant it to contain %q", err, want)
	}
	// Given --addr, SLIDE_ADDR is not what went wrong.
	_, _, err = runQuery(t, "metrics", "--addr", "http://127.0.0.1:1", "--timeout", "2s")
	if err == nil || strings.Contains(err.Error(), "SLIDE_ADDR") || !strings.Contains(err.Error(), "see --addr or SLIDE_URL") {
		t.Fatalf("--addr failing: %v", err)
	}
}

// A server that is not slide (a proxy's empty 404, an HTML error page) answered
// `slide query:  (HTTP 404 http)`: nothing to act on. The error now says which URL answered
// what, that it is no slide error, and where slide query is pointed from.
func TestQueryNonSlideAnswer(t *testing.T) {
	for _, body := range []string{"", "<html><body><h1>502 Bad Gateway</h1>" + strings.Repeat("x", 500) + "</body></html>"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, body)
		}))
		_, _, err := runQuery(t, "metrics", "--addr", srv.URL)
		srv.Close()
		if err == nil {
			t.Fatal("a 404 of another server: no error")
		}
		msg := err.Error()
		for _, want := range []string{srv.URL + "/v1/metrics", "404 Not Found", "not slide's", "--addr or SLIDE_URL"} {
			if !strings.Contains(msg, want) {
				t.Errorf("body %.20q: %q; want it to contain %q", body, msg, want)
			}
		}
		if len(msg) > 400 {
			t.Errorf("body %.20q: an error of %d bytes; want the body clipped", body, len(msg))
		}
	}
}
