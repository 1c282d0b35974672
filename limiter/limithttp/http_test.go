package limithttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// errorBody is the error envelope the handlers write (httperr.Write).
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
	} `json:"error"`
}

// testClock is a settable clock for handler tests.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time)     { c.mu.Lock(); c.now = t; c.mu.Unlock() }
func (c *testClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

func post(h http.Handler, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/allow", strings.NewReader(body)))
	return w
}

func TestAllowHandlerLogin(t *testing.T) {
	clk := &testClock{now: t0}
	s := newTestService(t, limiter.Config{Clock: clk.Now, Policies: []limiter.Policy{
		{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute},
	}})
	h := AllowHandler(s)
	var w *httptest.ResponseRecorder
	for i := 0; i < 3; i++ {
		w = post(h, `{"policy":"login","key":"u42","cost":1}`)
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d %s", i, w.Code, w.Body)
		}
		clk.Add(time.Second)
	}
	if got, want := w.Body.String(), `{"allowed":true,"policy":"login","limit":3,"remaining":0,"retry_after_ms":0,"reset_after_ms":60000}`+"\n"; got != want {
		t.Errorf("third body:\n got  %s want %s", got, want)
	}
	clk.Add(-time.Second) // the 4th request in the same instant as the 3rd: t0+2s
	w = post(h, `{"policy":"login","key":"u42"}`)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th: status %d, want 429", w.Code)
	}
	if got, want := w.Body.String(), `{"allowed":false,"policy":"login","limit":3,"remaining":0,"retry_after_ms":58000,"reset_after_ms":60000}`+"\n"; got != want {
		t.Errorf("4th body:\n got  %s want %s", got, want)
	}
	for k, want := range map[string]string{
		"Content-Type":            "application/json",
		HeaderRetryAfter:          "58",
		HeaderRateLimitPolicy:     `"login";q=3;w=60`,
		HeaderRateLimit:           `"login";r=0;t=58`, // its Retry-After (draft-10)
		HeaderXRateLimitLimit:     "3",
		HeaderXRateLimitRemaining: "0",
		HeaderXRateLimitReset:     "1764489662", // t0 + 2 s + 60 s
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}

func TestAllowHandlerHeadersRoundUp(t *testing.T) {
	clk := &testClock{now: t0.Add(300 * time.Millisecond)}
	s := newTestService(t, limiter.Config{Clock: clk.Now, Policies: []limiter.Policy{
		{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 5},
	}})
	h := AllowHandler(s)
	for i := 0; i < 10; i++ {
		post(h, `{"policy":"api","key":"k"}`)
	}
	w := post(h, `{"policy":"api","key":"k"}`)
	// RetryAfter 200 ms → Retry-After 1 s; reset 2 s from t0+0.3 s → Unix second rounded up.
	if w.Code != 429 || w.Header().Get(HeaderRetryAfter) != "1" || w.Header().Get(HeaderXRateLimitReset) != "1764489603" ||
		w.Header().Get(HeaderRateLimitPolicy) != `"api";q=10;w=2` || w.Header().Get(HeaderRateLimit) != `"api";r=0;t=1` {
		t.Errorf("status %d headers %v", w.Code, w.Header())
	}
	var resp AllowResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.RetryAfterMs != 200 || resp.ResetAfterMs != 2000 {
		t.Errorf("body %s (%v)", w.Body, err)
	}
}

func TestAllowHandlerMultiPolicy(t *testing.T) {
	s := newTestService(t, limiter.Config{Policies: []limiter.Policy{
		{Name: "per-user", Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute},
		{Name: "per-tenant", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour},
	}})
	h := AllowHandler(s)
	post(h, `{"policies":["per-user","per-tenant"],"key":"u1"}`)
	w := post(h, `{"policies":["per-user","per-tenant"],"key":"u1"}`)
	want := `{"allowed":false,"policy":"per-user","limit":1,"remaining":0,"retry_after_ms":60000,"reset_after_ms":60000,` +
		`"decisions":[{"allowed":false,"policy":"per-user","limit":1,"remaining":0,"retry_after_ms":60000,"reset_after_ms":60000},` +
		`{"allowed":true,"policy":"per-tenant","limit":10,"remaining":8,"retry_after_ms":0,"reset_after_ms":3600000}]}` + "\n"
	if w.Code != 429 || w.Body.String() != want {
		t.Errorf("status %d body\n got  %s want %s", w.Code, w.Body, want)
	}
	if got := w.Header().Get(HeaderRateLimitPolicy); got != `"per-user";q=1;w=60, "per-tenant";q=10;w=3600` {
		t.Errorf("RateLimit-Policy = %s", got)
	}
	if got := w.Header().Get(HeaderRateLimit); got != `"per-user";r=0;t=60, "per-tenant";r=8;t=3600` {
		t.Errorf("RateLimit = %s", got)
	}
}

func TestAllowHandlerErrors(t *testing.T) {
	s := newTestService(t, limiter.Config{Redis: downBackend{}, Policies: []limiter.Policy{
		{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute},
		redisPolicy("otp", limiter.FailClosed),
	}})
	h := AllowHandler(s)
	for _, c := range []struct {
		name, body       string
		status           int
		code, param, msg string
	}{
		{"unknown policy", `{"policy":"nope","key":"u"}`, 400, "bad_parameter", "policy", `parameter "policy": unknown policy "nope"; known: otp, login`},
		// A slip of a letter names the policy meant, as an unknown metric of /v1/window does.
		{"misspelt policy", `{"policy":"logn","key":"u"}`, 400, "bad_parameter", "policy", `parameter "policy": unknown policy "logn" (did you mean "login"?); known: login, otp`},
		{"missing policy", `{"key":"u"}`, 400, "bad_parameter", "policy", `parameter "policy" (or "policies") is required`},
		{"both", `{"policy":"login","policies":["login"],"key":"u"}`, 400, "bad_parameter", "policy", `give either "policy" or "policies", not both`},
		{"duplicate", `{"policies":["login","login"],"key":"u"}`, 400, "bad_parameter", "policies", `parameter "policies": "login" named twice`},
		{"empty key", `{"policy":"login","key":""}`, 400, "bad_parameter", "key", `parameter "key": must be 1 to 256 bytes`},
		{"control key", `{"policy":"login","key":"a\u0000b"}`, 400, "bad_parameter", "key", `parameter "key"`},
		{"negative cost", `{"policy":"login","key":"u","cost":-1}`, 400, "bad_parameter", "cost", `parameter "cost": must be an integer ≥ 0`},
		{"cost over quota", `{"policy":"login","key":"u","cost":4}`, 400, "bad_parameter", "cost", `parameter "cost": cost exceeds the policy quota: cost 4, policy "login" allows at most 3`},
		{"cost not a number", `{"policy":"login","key":"u","cost":"x"}`, 400, "bad_parameter", "cost", `parameter "cost": must be an integer`},
		{"fractional cost", `{"policy":"login","key":"u","cost":1.5}`, 400, "bad_parameter", "cost", `parameter "cost": must be an integer`},
		{"key not a string", `{"policy":"login","key":42}`, 400, "bad_parameter", "key", `parameter "key": must be a string`},
		{"unknown field", `{"policy":"login","key":"u","cots":1}`, 400, "bad_parameter", "cots", `unknown field "cots"`},
		{"not json", `policy=login`, 400, "bad_body", "", "body is not a JSON object"},
		{"two objects", `{"policy":"login","key":"u"} {}`, 400, "bad_body", "", "body must be one JSON object"},
		{"too large", `{"policy":"login","key":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413, "body_too_large", "", "body exceeds 65536 bytes"},
		{"backend down, closed", `{"policy":"otp","key":"u"}`, 503, "unavailable", "", `policy "otp": rate limit backend unavailable`},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := post(h, c.body)
			var e errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if w.Code != c.status || e.Error.Code != c.code || e.Error.Param != c.param || !strings.HasPrefix(e.Error.Message, c.msg) {
				t.Errorf("got %d %s param %q %q\nwant %d %s param %q %q…", w.Code, e.Error.Code, e.Error.Param, e.Error.Message, c.status, c.code, c.param, c.msg)
			}
			if ra := w.Header().Get(HeaderRetryAfter); (c.status == 503) != (ra == "1") {
				t.Errorf("Retry-After %q on a %d", ra, c.status)
			}
		})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/allow", nil))
	if w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
}

func FuzzAllowHandler(f *testing.F) {
	for _, s := range []string{
		`{"policy":"login","key":"u42","cost":1}`,
		`{"policies":["login","api"],"key":"u42","cost":0}`,
		`{"policy":"api","key":"k","cost":99999999999999999999}`,
		`{"policy":"login","key":"\u00ff","cost":-9223372036854775808}`,
		`[]`, `null`, `{"policy":null}`,
	} {
		f.Add(s)
	}
	s, err := limiter.NewService(limiter.Config{Clock: func() time.Time { return t0 }, Policies: []limiter.Policy{
		{Name: "login", Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Minute},
		{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 5},
	}})
	if err != nil {
		f.Fatal(err)
	}
	h := AllowHandler(s)
	f.Fuzz(func(t *testing.T, body string) {
		w := post(h, body)
		switch w.Code {
		case 200, 429:
			var r AllowResponse
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.Allowed != (w.Code == 200) {
				t.Fatalf("%d with body %q", w.Code, w.Body)
			}
		case 400, 413:
			var e errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%d with body %q", w.Code, w.Body)
			}
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}
