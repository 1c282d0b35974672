package query_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	slideevent "github.com/slide-metrics/slide/event" // named: these tests have an event type of their own
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// t0 is the fixed start of every test's clock: 2025-11-30T08:00:00Z, a slot boundary.
const t0 = int64(1764489600000)

// clock is a test clock in unix ms, safe for concurrent use.
type clock struct{ ms atomic.Int64 }

func newClock(ms int64) *clock { c := &clock{}; c.ms.Store(ms); return c }

func (c *clock) Now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *clock) set(ms int64)        { c.ms.Store(ms) }
func (c *clock) millis() int64       { return c.ms.Load() }
func (c *clock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// intake is the events sink slide serve builds: the event package's intake into st.
func intake(t testing.TB, st *window.Store) *slideevent.Intake {
	in, err := slideevent.NewIntake(st, slideevent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// env is a store, a clock and a server on a real listener.
type env struct {
	t     testing.TB
	store *window.Store
	clock *clock
	srv   *query.Server
	http  *httptest.Server
	reg   *prometheus.Registry
}

// newEnv starts a server over a fresh store (10 s × 30 slots unless ring is set) with the
// event intake; mod adjusts the config before New.
func newEnv(t testing.TB, mod func(*query.Config)) *env {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{
		Ring:    window.RingConfig{Slot: 10 * time.Second, Slots: 30},
		Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, clock: newClock(t0), reg: prometheus.NewRegistry()}
	cfg := query.Config{
		Store: st, Now: e.clock.Now, Events: intake(t, st),
		Registerer: e.reg, Gatherer: e.reg,
	}
	if mod != nil {
		mod(&cfg)
	}
	if e.srv, err = query.New(cfg); err != nil {
		t.Fatal(err)
	}
	e.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(e.http.Close)
	return e
}

// do sends a request and returns the status and body.
func (e *env) do(method, path string, body []byte, hdr ...string) (int, []byte, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

// getJSON GETs path, expects status and decodes the body into v.
func (e *env) getJSON(path string, status int, v any) {
	e.t.Helper()
	code, b, _ := e.do("GET", path, nil)
	if code != status {
		e.t.Fatalf("GET %s = %d %s, want %d", path, code, b, status)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

// post sends NDJSON events and returns the decoded result.
func (e *env) post(lines []byte) eventsAnswer {
	e.t.Helper()
	code, b, _ := e.do("POST", "/v1/events", lines)
	if code != 200 {
		e.t.Fatalf("POST /v1/events = %d %s", code, b)
	}
	var a eventsAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		e.t.Fatal(err)
	}
	return a
}

type eventsAnswer struct {
	Accepted int               `json:"accepted"`
	Rejected map[string]int    `json:"rejected"`
	First    map[string]string `json:"first"`
}

// The answers the tests decode: the exported response types.
type (
	windowAnswer = query.WindowResponse
	topAnswer    = query.TopResponse
	errorAnswer  = query.ErrorResponse
)

// event is one test event and its NDJSON line.
type event struct {
	ts     int64
	key    string
	metric string
	value  float64
	count  uint64
}

func (ev event) line() string {
	if ev.count > 1 {
		return fmt.Sprintf(`{"ts":%d,"key":%q,"metric":%q,"value":%v,"count":%d}`+"\n", ev.ts, ev.key, ev.metric, ev.value, ev.count)
	}
	return fmt.Sprintf(`{"ts":%d,"key":%q,"metric":%q,"value":%v}`+"\n", ev.ts, ev.key, ev.metric, ev.value)
}

func ndjson(evs []event) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		b.WriteString(ev.line())
	}
	return b.Bytes()
}

func jsonInto(b []byte, v any) error { return json.Unmarshal(b, v) }
