package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// load is the concurrent query traffic: closed-loop /v1/window and /v1/allow clients on
// keep-alive connections. Each worker keeps its own endpointStats; results merges them.
type load struct {
	base   string
	keys   int
	client *http.Client
	seen   []atomic.Bool // per key: /v1/window has answered 200 for it

	windowN, allowN atomic.Int64 // requests so far, for progress lines
	mu              sync.Mutex
	window, allow   []*endpointStats
}

func newLoad(base string, keys int) *load {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	return &load{base: base, keys: keys, seen: make([]atomic.Bool, keys),
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// start launches the workers; they stop when ctx ends.
func (l *load) start(ctx context.Context, wg *sync.WaitGroup, windowWorkers, allowWorkers int) {
	for i := range windowWorkers {
		st := newEndpointStats()
		l.window = append(l.window, st)
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		wg.Go(func() { l.windowLoop(ctx, rng, st) })
	}
	for i := range allowWorkers {
		st := newEndpointStats()
		l.allow = append(l.allow, st)
		rng := rand.New(rand.NewPCG(uint64(i), 2))
		wg.Go(func() { l.allowLoop(ctx, rng, st) })
	}
}

// counts returns the requests made so far.
func (l *load) counts() (window, allow int64) { return l.windowN.Load(), l.allowN.Load() }

// results merges the workers' stats; call it after the workers have stopped.
func (l *load) results() (window, allow *endpointStats) {
	window, allow = newEndpointStats(), newEndpointStats()
	for _, st := range l.window {
		window.merge(st)
	}
	for _, st := range l.allow {
		allow.merge(st)
	}
	l.client.CloseIdleConnections()
	return window, allow
}

func (l *load) windowLoop(ctx context.Context, rng *rand.Rand, st *endpointStats) {
	for ctx.Err() == nil {
		k := rng.IntN(l.keys)
		url := l.base + "/v1/window?metric=latency_ms&key=tenant-" + strconv.Itoa(k+1) + "&window=5m&q=0.5,0.95,0.99"
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		code, body, d, err := l.do(req)
		if ctx.Err() != nil {
			return // the request was cut short by the end of the run, not by slide
		}
		l.windowN.Add(1)
		if err != nil {
			st.fail("GET "+url, err.Error())
			continue
		}
		st.latency(d)
		switch o := classifyWindow(code, body, l.seen[k].Load()); o {
		case windowOK:
			l.seen[k].Store(true)
			st.ok(code)
		case windowNotYet:
			st.notYet++
		default:
			st.fail("GET "+url, fmt.Sprintf("%s: %d %s", o, code, bytes.TrimSpace(body)))
		}
	}
}

// allowBodies are the decisions the allow workers ask for in turn: a token bucket, a
// sliding counter, and the token bucket together with both usage rules (window reads).
var allowBodies = []string{
	`{"policy":"api","key":"tenant-%d","cost":1}`,
	`{"policy":"window","key":"tenant-%d"}`,
	`{"policies":["api","quota","shed-slow"],"key":"tenant-%d"}`,
}

// allowKeys is how many tenants the allow workers ask for: the first tenth, so that each
// key sees enough requests to be denied sometimes.
func allowKeys(keys int) int { return max(1, keys/10) }

func (l *load) allowLoop(ctx context.Context, rng *rand.Rand, st *endpointStats) {
	url := l.base + "/v1/allow"
	n := allowKeys(l.keys)
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf(allowBodies[i%len(allowBodies)], rng.IntN(n)+1)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		code, resp, d, err := l.do(req)
		if ctx.Err() != nil {
			return
		}
		l.allowN.Add(1)
		if err != nil {
			st.fail("POST /v1/allow "+body, err.Error())
			continue
		}
		st.latency(d)
		if problem := classifyAllow(code, resp); problem != "" {
			st.fail("POST /v1/allow "+body, fmt.Sprintf("%s: %d %s", problem, code, bytes.TrimSpace(resp)))
			continue
		}
		st.ok(code)
	}
}

// do sends req and reads the whole answer (so the connection is reused); d is the time
// from sending to the last byte.
func (l *load) do(req *http.Request) (code int, body []byte, d time.Duration, err error) {
	t0 := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, body, time.Since(t0), err
}

// windowOutcome classifies one /v1/window answer.
type windowOutcome uint8

const (
	windowOK           windowOutcome = iota // 200 with the series
	windowNotYet                            // 404 for a key that has not answered 200 yet
	windowVanished                          // 404 for a key that answered 200 before
	windowBadBody                           // 200 that is not a latency_ms window
	windowBadStatus                         // anything else
	windowOutcomeCount                      // number of outcomes
)

var windowOutcomeNames = [windowOutcomeCount]string{"ok", "not yet", "series vanished after a 200", "200 without a latency_ms window", "unexpected status"}

func (o windowOutcome) String() string {
	if o < windowOutcomeCount {
		return windowOutcomeNames[o]
	}
	return "windowOutcome(" + strconv.Itoa(int(o)) + ")"
}

// classifyWindow judges a /v1/window answer for a key that has (seen) or has not answered
// 200 before: a series never disappears during the run (it is written every few ms and
// its window is 5 min), so a 404 is fine only before the key's first event is consumed.
func classifyWindow(code int, body []byte, seen bool) windowOutcome {
	switch {
	case code == http.StatusOK && bytes.HasPrefix(body, []byte(`{"metric":"latency_ms","key":"tenant-`)) && bytes.Contains(body, []byte(`"count":`)):
		return windowOK
	case code == http.StatusOK:
		return windowBadBody
	case code == http.StatusNotFound && !seen:
		return windowNotYet
	case code == http.StatusNotFound:
		return windowVanished
	}
	return windowBadStatus
}

// classifyAllow judges a /v1/allow answer: 200 must say allowed, 429 must say denied.
// It returns "" for a good answer, else what is wrong.
func classifyAllow(code int, body []byte) string {
	switch code {
	case http.StatusOK:
		if bytes.Contains(body, []byte(`"allowed":true`)) {
			return ""
		}
		return "200 without \"allowed\":true"
	case http.StatusTooManyRequests:
		if bytes.Contains(body, []byte(`"allowed":false`)) {
			return ""
		}
		return "429 without \"allowed\":false"
	}
	return "unexpected status"
}

// endpointStats are one route's answers: latencies of every answered request, counts by
// status, and failures with a few examples. Not safe for concurrent use: one per worker.
type endpointStats struct {
	lat      []time.Duration
	byCode   map[int]int64
	notYet   int64 // /v1/window 404 before the key's first event
	failures int64
	examples []string // the first few failures
}

const maxExamples = 5

func newEndpointStats() *endpointStats {
	return &endpointStats{lat: make([]time.Duration, 0, 1<<16), byCode: map[int]int64{}}
}

func (s *endpointStats) latency(d time.Duration) { s.lat = append(s.lat, d) }
func (s *endpointStats) ok(code int)             { s.byCode[code]++ }

func (s *endpointStats) fail(what, why string) {
	s.failures++
	if len(s.examples) < maxExamples {
		s.examples = append(s.examples, what+": "+why)
	}
}

func (s *endpointStats) merge(o *endpointStats) {
	s.lat = append(s.lat, o.lat...)
	for c, n := range o.byCode {
		s.byCode[c] += n
	}
	s.notYet += o.notYet
	s.failures += o.failures
	for _, e := range o.examples {
		if len(s.examples) < maxExamples {
			s.examples = append(s.examples, e)
		}
	}
}

// requests is every request made: answered ones (ok, not yet, failed) and transport errors.
func (s *endpointStats) requests() int64 {
	n := s.notYet + s.failures
	for _, c := range s.byCode {
		n += c
	}
	return n
}
