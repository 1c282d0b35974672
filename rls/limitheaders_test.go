package rls_test

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slide-metrics/slide/rls"
)

// limitHeaders is the response's three LimitHeaders, "" for each one absent,
// and how many times the names appear in all.
func limitHeaders(hv []*corev3.HeaderValue, n rls.LimitHeaderNames) (got [3]string, count int) {
	for _, h := range hv {
		for i, name := range []string{n.Limit, n.Remaining, n.Reset} {
			if h.GetKey() == name {
				got[i] = h.GetValue()
				count++
			}
		}
	}
	return got, count
}

// TestLimitHeaders: with ServerConfig.LimitHeaders the answers carry
// envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED headers after slide's
// own, from the descriptor envoyproxy/ratelimit picks (the least remaining;
// over the limit, the descriptor that is over), reset in whole seconds.
func TestLimitHeaders(t *testing.T) {
	names := rls.LimitHeaderNames{Limit: "X-RateLimit-Limit", Remaining: "X-RateLimit-Remaining", Reset: "X-RateLimit-Reset"}
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{}), limitHdr: &names})
	check := func(what string, resp *pb.RateLimitResponse, want [3]string) {
		t.Helper()
		got, n := limitHeaders(resp.GetResponseHeadersToAdd(), names)
		if got != want || n != 3 {
			t.Errorf("%s: limit, remaining, reset %q (%d headers), want %q", what, got, n, want)
		}
		if header(resp, "ratelimit") == "" {
			t.Errorf("%s: slide's own RateLimit header is gone: %v", what, resp.GetResponseHeadersToAdd())
		}
	}
	// t0 is a quarter second into the hour: 59.75 s of the minute remain, reset 60.
	check("allowed", h.call(t, req("shop", 0, desc("client_id", "c1"))), [3]string{"20", "19", "60"})
	check("least remaining of two", h.call(t, req("shop", 0, desc("client_id", "c1"), desc("region", "eu"))), [3]string{"10", "9", "3600"})
	for range 9 {
		h.call(t, req("shop", 0, desc("region", "eu")))
	}
	// Over the limit, the denying descriptor answers, whichever its place.
	resp := h.call(t, req("shop", 0, desc("region", "eu"), desc("client_id", "c2")))
	if resp.GetOverallCode() != over {
		t.Fatalf("region eu after 10: %v, want OVER_LIMIT", resp)
	}
	check("denied", resp, [3]string{"10", "0", "3600"})
	check("denied, second place", h.call(t, req("shop", 0, desc("client_id", "c3"), desc("region", "eu"))), [3]string{"10", "0", "3600"})
	check("blocked", h.call(t, req("shop", 0, desc("banned", "yes"))), [3]string{"0", "0", "60"})

	// No descriptor with a limit: none, as envoyproxy/ratelimit.
	for _, r := range []*pb.RateLimitRequest{req("shop", 0, desc("health", "x")), req("nope", 0, desc("client_id", "c1"))} {
		if _, n := limitHeaders(h.call(t, r).GetResponseHeadersToAdd(), names); n != 0 {
			t.Errorf("%v: %d limit headers, want none", r, n)
		}
	}

	// Off by default.
	off := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	resp = off.call(t, req("shop", 0, desc("client_id", "c1")))
	for _, hv := range resp.GetResponseHeadersToAdd() {
		if k := strings.ToLower(hv.GetKey()); strings.HasPrefix(k, "x-ratelimit-") || strings.HasPrefix(k, "ratelimit-") && k != "ratelimit-policy" {
			t.Errorf("without LimitHeaders: header %s: %s", hv.GetKey(), hv.GetValue())
		}
	}
}

func TestLimitHeaderNamesValidate(t *testing.T) {
	if err := rls.DefaultLimitHeaderNames.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, n := range []rls.LimitHeaderNames{
		{Limit: "", Remaining: "R", Reset: "S"},
		{Limit: "a b", Remaining: "R", Reset: "S"},
		{Limit: "L", Remaining: "l", Reset: "S"},
		{Limit: "L", Remaining: "R", Reset: "Retry-After"},
		{Limit: "RateLimit", Remaining: "R", Reset: "S"},
	} {
		if err := n.Validate(); err == nil {
			t.Errorf("%+v: valid, want an error", n)
		}
	}
}
