package limithttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// strictDecode is the reference: encoding/json with unknown fields and trailing data refused.
func strictDecode(data []byte) (allowRequest, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req allowRequest
	if err := dec.Decode(&req); err != nil {
		return req, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, false
	}
	return req, true
}

var allowSeeds = []string{
	`{"policy":"api","key":"tenant-42","cost":1}`,
	`{"key":"u42","policy":"login"}`,
	` { "policies" : ["per-user", "per-tenant"] , "key":"k", "cost": 0 } `,
	`{"policy":"api","key":"caf\u00e9"}`,
	`{"policy":"api","key":"café","cost":-3}`,
	`{"policy":"api","key":"k","cost":1.5}`,
	`{"policy":"api","key":"k","cost":1e3}`,
	`{"policy":"api","key":"k","cost":007}`,
	`{"policy":"api","policy":"x","key":"k"}`,
	`{"policy":"api","key":"k","extra":1}`,
	`{"policy":"api","key":"k"} {}`,
	`{"policy":"api","key":"k",}`,
	`{"policies":[],"key":"k"}`,
	`{"policy":null,"key":"k"}`,
	"{\"policy\":\"a\xffb\",\"key\":\"k\"}",
	`{"Policy":"api","key":"k"}`,
	`{"policy":"api","key":"k","k\u0065y":"j"}`,
	`{"policy":"api","key":"t\ud800"}`,
	`{"policy":"api","key":"\ud83d\ude00"}`,
	`{}`,
	``,
}

// The hand parser may decline anything, but what it accepts must decode exactly as
// encoding/json decodes it.
func FuzzParseAllowFast(f *testing.F) {
	for _, s := range allowSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := parseAllowFast(data)
		if !ok {
			return
		}
		ref, refOK := strictDecode(data)
		if !refOK {
			t.Fatalf("fast path accepted %q, encoding/json refuses it", data)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", data, fast, ref)
		}
		strict, err := decodeAllowStrict(data)
		if err != nil || !reflect.DeepEqual(fast, strict) {
			t.Fatalf("%q: fast %+v, strict decoder %+v %v", data, fast, strict, err)
		}
	})
}

func TestParseAllowFastTakesTheCommonShapes(t *testing.T) {
	for _, s := range []string{allowSeeds[0], allowSeeds[1], allowSeeds[2], allowSeeds[4]} {
		if _, ok := parseAllowFast([]byte(s)); !ok {
			t.Errorf("%s: common shape sent to the slow path", s)
		}
	}
}

// The appended answer is byte for byte what json.Encoder writes.
func TestAppendAllowResponseMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	names := []string{"api", "per-user", "a\"b", "tab\there", "<html>&", "café", "bad\xffutf8", "\u2028line", "\x01\b\f"}
	dec := func() DecisionJSON {
		return DecisionJSON{
			Allowed: rng.IntN(2) == 0, Policy: names[rng.IntN(len(names))],
			Limit: rng.Int64N(1e12) - 5, Remaining: rng.Int64N(100), RetryAfterMs: rng.Int64N(1e6),
			ResetAfterMs: rng.Int64N(1e6), DelayMs: rng.Int64N(3) * rng.Int64N(1000),
			Shadowed: rng.IntN(3) == 0, Degraded: rng.IntN(3) == 0,
		}
	}
	for range 2000 {
		r := AllowResponse{DecisionJSON: dec()}
		for range rng.IntN(4) {
			r.Decisions = append(r.Decisions, dec())
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(r); err != nil {
			t.Fatal(err)
		}
		if got := appendAllowResponse(nil, &r); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("got  %s\nwant %s", got, want.Bytes())
		}
	}
}

func TestAllowHandlerAllocations(t *testing.T) {
	svc, err := limiter.NewService(limiter.Config{Policies: []limiter.Policy{{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 1 << 40, RefillPerSecond: 1e6}},
		Clock: func() time.Time { return time.Unix(1_764_489_600, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	h := AllowHandler(svc)
	body := []byte(`{"policy":"api","key":"tenant-42","cost":1}`)
	w := &discardWriter{h: map[string][]string{}}
	req, _ := newPost(body)
	allocs := testing.AllocsPerRun(200, func() {
		req.Body = io.NopCloser(bytes.NewReader(body))
		clear(w.h)
		h.ServeHTTP(w, req)
	})
	// Left: the key and policy strings, the header string and its slice, the MaxBytesReader,
	// the one-element names slice and the reader; none of them grow with the request.
	if allocs > 12 {
		t.Fatalf("POST /v1/allow allocates %v per request in process, want ≤ 12", allocs)
	}
}

func newPost(body []byte) (*http.Request, error) {
	return http.NewRequest("POST", "/v1/allow", bytes.NewReader(body))
}

// TestDecodeAllowDialect is the ninth probe: /v1/allow spoke encoding/json's
// dialect (case-insensitive names, the last of duplicate fields, invalid UTF-8 rewritten to
// U+FFFD) where the event decoder does not. Each of these is refused now, naming the field.
func TestDecodeAllowDialect(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{"Policy":"api","key":"k"}`, "Policy"},
		{`{"policy":"api","KEY":"k"}`, "KEY"},
		{`{"policy":"api","key":"k","key":"j"}`, "key"},
		{`{"policy":"api","key":"k","k\u0065y":"j"}`, "key"},
		{`{"policy":"api","policy":"api","key":"k"}`, "policy"},
		{"{\"policy\":\"api\",\"key\":\"t\xff\"}", "key"},
		{"{\"policy\":\"api\",\"key\":\"t\xfe\"}", "key"},
		{`{"policy":"api","key":"t\ud800"}`, "key"},
		{`{"policy":"api","key":"t\udc00"}`, "key"},
		{"{\"policies\":[\"a\",\"b\xff\"],\"key\":\"k\"}", "policies"},
	} {
		_, err := decodeAllow([]byte(tc.body))
		var rqe *requestError
		if !errors.As(err, &rqe) || rqe.param != tc.param {
			t.Errorf("%q: %v, want a refusal naming %q", tc.body, err, tc.param)
		}
	}
	for _, body := range []string{
		`{"policy":"api","key":"t\u00e9\ud83d\ude00","cost":2}`,
		`{"key":"k","policies":["a","b"],"cost":null}`,
		`{"policy":"api","key":"t\ufffd"}`,
	} {
		if _, err := decodeAllow([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}
