package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// TestSlowlorisHoldsOnlyItsShare attacks the HTTP server serve builds (its listener with the
// per-client cap, its http.Server with a 1 s read-header timeout) from 127.0.0.2: 3 × cap
// connections, each trickling a request line one byte at a time. The server must keep at
// most cap of them (closing the rest at once), close those cap within the header timeout,
// and meanwhile answer a client from 127.0.0.1 every time.
func TestSlowlorisHoldsOnlyItsShare(t *testing.T) {
	const (
		capN          = 4
		headerTimeout = time.Second
		slack         = 1500 * time.Millisecond
	)
	store, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ObserveAt(time.Now().UnixMilli(), window.Event{TS: time.Now().UnixMilli(), Metric: "latency_ms", Key: "tenant-1", Value: 5}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	qs, err := query.New(query.Config{Store: store, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	c := serveConfig{addr: "127.0.0.1:0", maxConnsPerClient: capN, readHeaderTimeout: headerTimeout}
	if err := c.checkHTTP(); err != nil {
		t.Fatal(err)
	}
	ln, err := c.listen(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(qs.Handler(), c.readHeaderTimeout, slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	addr := ln.Addr().String()

	// The attack: each connection writes a partial request line, a byte every 50 ms, and
	// records when (and whether) the server closed it.
	type victim struct {
		dialed, closed time.Time
		err            error // what ended the read: EOF or a reset, or the client's own timeout
	}
	results := make([]victim, 3*capN)
	var wg sync.WaitGroup
	attackStart := time.Now()
	for i := range results {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
		conn, err := d.Dial("tcp", addr)
		dialed := time.Now()
		if err != nil {
			// A connection refused at once may be reset before connect returns.
			results[i] = victim{dialed: dialed, closed: dialed, err: err}
			continue
		}
		defer conn.Close()
		stop := make(chan struct{})
		wg.Go(func() { // trickle
			line := "GET /v1/window?metric=latency_ms&key=tenant-1&window=5m&q=0.5,0.99 HTTP/1.1\r\nHost: x\r\n"
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for j := 0; j < len(line); j++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write([]byte{line[j]}); err != nil {
					return
				}
			}
		})
		wg.Go(func() { // watch
			defer close(stop)
			_ = conn.SetReadDeadline(dialed.Add(headerTimeout + 2*slack))
			_, err := io.Copy(io.Discard, conn) // a timed-out header gets no answer: nothing to read
			if err == nil {
				err = io.EOF
			}
			results[i] = victim{dialed: dialed, closed: time.Now(), err: err}
		})
	}

	// The normal client, on its own connection for each request, while the attack lasts.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	served := 0
	for time.Since(attackStart) < headerTimeout+slack/2 {
		for _, path := range []string{"/healthz", "/v1/window?metric=latency_ms&key=tenant-1&window=1m&q=0.5"} {
			resp, err := client.Get("http://" + addr + path)
			if err != nil {
				t.Fatalf("normal client during the attack, GET %s: %v", path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("normal client during the attack, GET %s = %d %s", path, resp.StatusCode, body)
			}
			served++
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()

	var refused, kept int
	var longest time.Duration
	for i, v := range results {
		var ne net.Error
		if v.err == nil || (errors.As(v.err, &ne) && ne.Timeout()) {
			t.Errorf("attacker conn %d still open %v after its dial: the server never closed it (%v)", i, v.closed.Sub(v.dialed), v.err)
			continue
		}
		held := v.closed.Sub(v.dialed)
		longest = max(longest, held)
		switch {
		case held < headerTimeout/2:
			// A kept connection lives the header timeout from its accept (about its dial);
			// a refused one is closed, or reset during connect, within milliseconds.
			refused++
		case held <= headerTimeout+slack:
			kept++
		default:
			t.Errorf("attacker conn %d closed after %v, want within %v", i, held, headerTimeout+slack)
		}
	}
	if refused != 2*capN || kept != capN {
		t.Errorf("attack: %d refused at once and %d closed by the header timeout, want %d and %d", refused, kept, 2*capN, capN)
	}
	if got := ln.Refused(); got != 2*capN {
		t.Errorf("refused counter %d, want %d (the normal client is never refused)", got, 2*capN)
	}
	if served < 4 {
		t.Errorf("the normal client got only %d answers during the attack", served)
	}
	t.Logf("slowloris from 127.0.0.2: %d connections against a cap of %d: %d refused at once, %d held until the %v header timeout (longest %v); a normal client from 127.0.0.1 got 200 on all %d requests meanwhile",
		len(results), capN, refused, kept, headerTimeout, longest.Round(time.Millisecond), served)
	// Every slot is given back, and the counters are on the registry /metrics serves.
	for deadline := time.Now().Add(2 * time.Second); ln.OpenConns() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted open after the attack", ln.OpenConns())
		}
	}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("slide_http_conns_refused_total %d\n", 2*capN); !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if !strings.Contains(string(body), "slide_http_conns_open 1\n") { // this very scrape
		t.Errorf("/metrics lacks slide_http_conns_open 1")
	}
}

// TestServeRefusesBadHTTPFlags: flags that cannot work fail before anything starts, from the
// command line and from the environment alike.
func TestServeRefusesBadHTTPFlags(t *testing.T) {
	base := []string{"serve", "--addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--auth-reads"}, "--auth-reads needs --auth-token-file"},
		{[]string{"--read-header-timeout", "0s"}, "--read-header-timeout 0s: must be positive"},
		{[]string{"--max-conns-per-client", "-1"}, "--max-conns-per-client -1"},
	} {
		code, _, errOut := runCmd(t, context.Background(), "", append(base, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", c.args, code, errOut, c.want)
		}
	}
	t.Setenv("SLIDE_AUTH_READS", "true")
	code, _, errOut := runCmd(t, context.Background(), "", base...)
	if code != 2 || !strings.Contains(errOut, "--auth-reads needs --auth-token-file") {
		t.Errorf("SLIDE_AUTH_READS=true without a token file: exit %d, stderr %q", code, errOut)
	}
}

// TestServeAuthReads runs slide serve with --auth-token-file and --auth-reads: reads and
// /metrics need the token, probes and the dashboard page do not.
func TestServeAuthReads(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("t0k3n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb proctest.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--embedded-kafka-addr", freeAddr(t), "--embedded-kafka-partitions", "1",
			"--auth-token-file", tokenFile, "--auth-reads"}, stdio{strings.NewReader(""), io.Discard, &errb})
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
	// Reads answer 503 until the windows are restored: wait for that, it is not the point here.
	if err := proctest.WaitStatus(context.Background(), base+"/readyz", 200, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path        string
		anon, token int
	}{
		{"/healthz", 200, 200},
		{"/", 200, 200},
		{"/v1/metrics", 401, 200},
		{"/v1/series", 401, 200},
		{"/metrics", 401, 200},
	} {
		if got := get(c.path, ""); got != c.anon {
			t.Errorf("GET %s without a token = %d, want %d", c.path, got, c.anon)
		}
		if got := get(c.path, "t0k3n"); got != c.token {
			t.Errorf("GET %s with the token = %d, want %d", c.path, got, c.token)
		}
	}
}

// hostilePolicyFiles are policy files an operator might get wrong or an attacker might
// plant; each must be refused with an error naming the file and the line, without a panic.
func hostilePolicyFiles() []struct{ name, data, want string } {
	return []struct{ name, data, want string }{
		{"malformed", "policies:\n  - name: a\n    limit: [1,\n", "bad.yaml:3: not YAML: "},
		{"tab indent", "policies:\n\t- name: a\n", "bad.yaml:2: not YAML: found character that cannot start any token"},
		{"empty file", "", "bad.yaml:1: empty file"},
		{"only a comment", "# nothing here\n", "bad.yaml:1: empty file"},
		{"huge name", "policies:\n  - name: " + strings.Repeat("x", 1<<20) + "\n", `bad.yaml:2: policy "` + strings.Repeat("x", 64) + `…": `},
		{"unknown field", "policies:\n  - name: a\n    algorithm: fixed_window\n    limitt: 5\n    window: 1m\n", `bad.yaml:4: policy "a": unknown field "limitt"`},
		{"negative limit", "policies:\n  - name: a\n    algorithm: fixed_window\n    window: 1m\n    limit: -5\n", `bad.yaml:5: policy "a": limit: must be between 1`},
		{"zero capacity", "policies:\n  - name: a\n    algorithm: token_bucket\n    capacity: 0\n    refill_per_second: 1\n", `bad.yaml:4: policy "a": capacity`},
		{"huge integer", "policies:\n  - name: a\n    algorithm: fixed_window\n    window: 1m\n    limit: 99999999999999999999999\n", `bad.yaml:5: policy "a": limit: must be an integer`},
		{"huge float", "policies:\n  - name: a\n    algorithm: token_bucket\n    capacity: 10\n    refill_per_second: 1e309\n", `bad.yaml:5: policy "a": refill_per_second`},
		{"huge duration", "policies:\n  - name: a\n    algorithm: fixed_window\n    limit: 1\n    window: 9999999999h\n", `bad.yaml:5: policy "a": window`},
		{"duplicate names", "policies:\n  - {name: a, algorithm: fixed_window, limit: 1, window: 1m}\n  - {name: a, algorithm: fixed_window, limit: 2, window: 1m}\n", `bad.yaml:3: policy "a": name: duplicate policy name (first defined at bad.yaml:2)`},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\npolicies:\n  - name: *c\n", "bad.yaml:5: name: must be a single value"},
		{"deep nesting", "policies: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n", "exceeded max depth"},
		{"NUL byte", "policies:\n  - name: a\x00b\n", "control characters"},
		{"invalid UTF-8", "policies:\n  - name: \xff\xfe\n", "UTF-8"},
		{"not a list", "policies: 5\n", "bad.yaml:1: policies: must be a non-empty list"},
		{"list of junk", "policies: [[], {}, 1]\n", "bad.yaml:1: a policy must be a mapping"},
		{"bad rule", "policies:\n  - {name: a, algorithm: fixed_window, limit: 1, window: 1m}\nrules:\n  - {name: r, metric: cost, agg: median, window: 1h, max: 1}\n", "bad.yaml:4"},
		{"bad rule match", "rules:\n  - {name: r, metric: cost, agg: sum, window: 1h, max: 1, match: 'route=~\"(\"'}\n", `bad.yaml:2: rule "r": match: "route=~\"(\"": `},
	}
}

// TestHostilePolicyFiles feeds each hostile file to usage.ParseFile, what slide serve
// --policies reads, and the policies-only ones to limiter.ParsePolicies.
func TestHostilePolicyFiles(t *testing.T) {
	for _, c := range hostilePolicyFiles() {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := noPanic(t, func() ([]limiter.Policy, []usage.Rule, error) { return usage.ParseFile([]byte(c.data), "bad.yaml") })
			if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("usage.ParseFile: %v; want an error naming bad.yaml and %q", err, c.want)
			}
			if strings.Contains(c.data, "rules:") {
				return
			}
			_, _, err = noPanic(t, func() ([]limiter.Policy, []usage.Rule, error) {
				ps, err := limiter.ParsePolicies([]byte(c.data), "bad.yaml")
				return ps, nil, err
			})
			if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("limiter.ParsePolicies: %v; want an error naming bad.yaml and %q", err, c.want)
			}
		})
	}
}

// TestHugePolicyFile: a 3 MB file (a comment that size, then a bad policy) is parsed, not
// choked on, and its error still names the right line; a 10 MB one is refused unread.
func TestHugePolicyFile(t *testing.T) {
	data := "# " + strings.Repeat("padding ", 3<<20/8) + "\npolicies:\n  - name: a\n    algorithm: nope\n"
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := usage.LoadFile(path)
	if err == nil || !strings.Contains(err.Error(), path+`:4: policy "a": algorithm: unknown algorithm "nope"`) {
		t.Fatalf("3 MB policy file: %v", err)
	}
	data = "# " + strings.Repeat("padding ", 10<<20/8) + "\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := usage.LoadFile(path); err == nil || !strings.Contains(err.Error(), path+": larger than 4 MiB") {
		t.Fatalf("10 MB policy file: %v", err)
	}
}

func noPanic[A, B any](t *testing.T, f func() (A, B, error)) (a A, b B, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic: %v", r)
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return f()
}

// TestServeFailsFastOnBadPolicies: slide serve --policies with a bad file exits 1 at once,
// the error naming file:line, and leaves nothing listening.
func TestServeFailsFastOnBadPolicies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("policies:\n  - name: api\n    algorithm: token_bucket\n    capacity: -3\n    refill_per_second: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	start := time.Now()
	code, _, errOut := runCmd(t, context.Background(), "", "serve", "--policies", path, "--addr", addr, "--embedded-kafka-addr", "127.0.0.1:0")
	took := time.Since(start)
	if code != 1 || !strings.Contains(errOut, path+`:4: policy "api": capacity`) {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming %s:4", code, errOut, path)
	}
	if took > 10*time.Second {
		t.Errorf("serve took %v to refuse a bad policy file", took)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on %s after serve refused to start", addr)
	}
}

// TestPromQLTimeoutEndsBeforeTheAnswerDeadline: serve's PromQL engine must give up on a query
// while its answer can still be written. The engine's default timeout (2 min) outlived the
// http.Server's 30 s WriteTimeout: `count(hot{code="200"})` over a day at 8 s steps (40,000
// series) ran 82 s at 1 GB and its client got "connection closed without response" instead
// of errorType "timeout".
func TestPromQLTimeoutEndsBeforeTheAnswerDeadline(t *testing.T) {
	c := serveConfig{promPushdown: true}
	srv := newHTTPServer(http.NotFoundHandler(), time.Second, slog.New(slog.DiscardHandler))
	timeout := c.promConfig(nil, nil, nil, nil).Timeout
	if timeout == 0 {
		timeout = promapi.DefaultTimeout
	}
	const margin = 5 * time.Second // to write the error answer in
	if timeout+margin > srv.WriteTimeout {
		t.Fatalf("PromQL timeout %s + %s margin passes the write deadline %s: a slow query's answer is never written", timeout, margin, srv.WriteTimeout)
	}
}

// TestEveryAnswerSaysNosniff: JSON answers, errors and the metrics page all carry
// X-Content-Type-Options: nosniff (only the dashboard's page did): a JSON answer holds
// keys as a client sent them, and no browser may guess it is a page.
func TestEveryAnswerSaysNosniff(t *testing.T) {
	store, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ObserveAt(time.Now().UnixMilli(), window.Event{TS: time.Now().UnixMilli(), Metric: "latency_ms", Key: "<script>x</script>", Value: 5}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	qs, err := query.New(query.Config{Store: store, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newHTTPServer(qs.Handler(), time.Second, slog.New(slog.DiscardHandler)).Handler)
	defer srv.Close()
	for _, path := range []string{"/v1/window?metric=latency_ms&key=*", "/v1/window?metric=nope", "/v1/top?metric=latency_ms", "/metrics", "/no-such-path", "/"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s (%d, %s): X-Content-Type-Options %q, want nosniff", path, res.StatusCode, res.Header.Get("Content-Type"), got)
		}
	}
}
