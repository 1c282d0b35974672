package rls_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/slide-metrics/slide/rls"
	"github.com/slide-metrics/slide/window"
)

const (
	ok   = pb.RateLimitResponse_OK
	over = pb.RateLimitResponse_OVER_LIMIT
)

// want is one descriptor status: code, requests_per_unit and unit of the
// current limit (0 and UNKNOWN: no limit), remaining.
type want struct {
	code      pb.RateLimitResponse_Code
	rpu       uint32
	unit      pb.RateLimitResponse_RateLimit_Unit
	remaining uint32
}

func checkStatus(t *testing.T, what string, st *pb.RateLimitResponse_DescriptorStatus, w want) {
	t.Helper()
	got := want{code: st.GetCode(), remaining: st.GetLimitRemaining()}
	if cl := st.GetCurrentLimit(); cl != nil {
		got.rpu, got.unit = cl.GetRequestsPerUnit(), cl.GetUnit()
	}
	if got != w {
		t.Errorf("%s: status %+v, want %+v (%v)", what, got, w, st)
	}
	if w.rpu > 0 && w.code == ok && st.GetDurationUntilReset() == nil {
		t.Errorf("%s: no duration_until_reset", what)
	}
}

// TestEnvoyScenarios drives the scenarios envoyproxy/ratelimit's integration
// tests assert (limits per descriptor, several descriptors, nested
// descriptors, unlimited, allow-listed values, unknown domains) through a real
// gRPC client against testdata/config.
func TestEnvoyScenarios(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	minute, hour, second := pb.RateLimitResponse_RateLimit_MINUTE, pb.RateLimitResponse_RateLimit_HOUR, pb.RateLimitResponse_RateLimit_SECOND

	resp := h.call(t, req("nope", 0, desc("client_id", "a")))
	if resp.GetOverallCode() != ok {
		t.Errorf("unknown domain: %v", resp.GetOverallCode())
	}
	checkStatus(t, "unknown domain", resp.GetStatuses()[0], want{code: ok})

	// A key alone: 20 a minute for each value.
	for i := range 25 {
		resp := h.call(t, req("shop", 0, desc("client_id", "c1")))
		w := want{code: ok, rpu: 20, unit: minute, remaining: uint32(max(19-i, 0))}
		if i >= 20 {
			w.code = over
		}
		if resp.GetOverallCode() != w.code {
			t.Fatalf("request %d: overall %v, want %v", i+1, resp.GetOverallCode(), w.code)
		}
		checkStatus(t, "client_id c1", resp.GetStatuses()[0], w)
		if d := resp.GetStatuses()[0].GetDurationUntilReset().AsDuration(); d != 59750*time.Millisecond {
			t.Errorf("duration_until_reset %v, want 59.75s (the rest of the minute)", d)
		}
	}
	checkStatus(t, "another value", h.call(t, req("shop", 0, desc("client_id", "c2"))).GetStatuses()[0], want{ok, 20, minute, 19})
	checkStatus(t, "override", h.call(t, req("shop", 0, desc("client_id", "partner"))).GetStatuses()[0], want{ok, 30, minute, 29})
	checkStatus(t, "allow-listed", h.call(t, req("shop", 0, desc("client_id", "internal"))).GetStatuses()[0], want{code: ok})

	// Two descriptors in one request: each is charged; the request is over when one is.
	for i := range 15 {
		resp := h.call(t, req("shop", 0, desc("client_id", "c3"), desc("region", "eu")))
		w0 := want{ok, 20, minute, uint32(19 - i)}
		w1 := want{ok, 10, hour, uint32(max(9-i, 0))}
		code := ok
		if i >= 10 {
			w1.code, code = over, over
		}
		if resp.GetOverallCode() != code {
			t.Fatalf("two descriptors, request %d: overall %v, want %v", i+1, resp.GetOverallCode(), code)
		}
		checkStatus(t, "client_id c3", resp.GetStatuses()[0], w0)
		checkStatus(t, "region eu", resp.GetStatuses()[1], w1)
	}

	// Nested descriptors.
	checkStatus(t, "tenant alone", h.call(t, req("shop", 0, desc("tenant", "acme"))).GetStatuses()[0], want{code: ok})
	checkStatus(t, "tenant+path default", h.call(t, req("shop", 0, desc("tenant", "acme", "path", "/cart"))).GetStatuses()[0], want{ok, 5, second, 4})
	checkStatus(t, "tenant+path override", h.call(t, req("shop", 0, desc("tenant", "acme", "path", "/checkout"))).GetStatuses()[0], want{ok, 10, second, 9})
	checkStatus(t, "other tenant", h.call(t, req("shop", 0, desc("tenant", "other", "path", "/cart"))).GetStatuses()[0], want{code: ok})
	checkStatus(t, "deeper than configured", h.call(t, req("shop", 0, desc("tenant", "acme", "path", "/cart", "x", "1"))).GetStatuses()[0], want{code: ok})
	for range 4 {
		h.call(t, req("shop", 0, desc("tenant", "acme", "path", "/cart")))
	}
	checkStatus(t, "tenant+path sixth", h.call(t, req("shop", 0, desc("tenant", "acme", "path", "/cart"))).GetStatuses()[0], want{over, 5, second, 0})
	h.advance(750 * time.Millisecond) // the next second
	checkStatus(t, "tenant+path next second", h.call(t, req("shop", 0, desc("tenant", "acme", "path", "/cart"))).GetStatuses()[0], want{ok, 5, second, 4})

	// Unlimited.
	for range 3 {
		checkStatus(t, "unlimited", h.call(t, req("shop", 0, desc("health", "x"))).GetStatuses()[0], want{code: ok, remaining: math.MaxUint32})
	}

	// requests_per_unit 0: every request is over the limit.
	resp = h.call(t, req("shop", 0, desc("banned", "yes")))
	if resp.GetOverallCode() != over || resp.GetStatuses()[0].GetCode() != over {
		t.Errorf("banned: %v", resp)
	}
}

// TestShadowMode: a shadow descriptor over its limit answers OK and is counted
// as shadow_over_limit.
func TestShadowMode(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	for i := range 5 {
		resp := h.call(t, req("shop", 0, desc("ip", "10.0.0.66")))
		if resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetCode() != ok {
			t.Fatalf("shadow request %d: %v", i+1, resp)
		}
		if r := header(resp, "retry-after"); r != "" {
			t.Errorf("shadow request %d: retry-after %q", i+1, r)
		}
	}
	if got := counter(t, h.reg, rls.MetricDescriptors, map[string]string{"domain": "shop", "descriptor": "ip_10.0.0.66", "result": "shadow_over_limit"}); got != 2 {
		t.Errorf("shadow_over_limit %v, want 2", got)
	}
	if got := counter(t, h.reg, rls.MetricDescriptors, map[string]string{"domain": "shop", "descriptor": "ip_10.0.0.66", "result": "ok"}); got != 3 {
		t.Errorf("ok %v, want 3", got)
	}
	if got := counter(t, h.reg, "slide_limiter_decisions_total", map[string]string{"policy": "rls.shop.ip_10.0.0.66", "result": "shadow_denied"}); got != 2 {
		t.Errorf("limiter shadow_denied %v, want 2", got)
	}
}

// TestHitsAddend: the request's hits_addend is the cost, a descriptor's own
// hits_addend overrides it (0 checks without charging), and a cost above the
// quota is over the limit without charging.
func TestHitsAddend(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	minute := pb.RateLimitResponse_RateLimit_MINUTE
	checkStatus(t, "hits 5", h.call(t, req("shop", 5, desc("client_id", "h"))).GetStatuses()[0], want{ok, 20, minute, 15})
	peek := req("shop", 5, desc("client_id", "h"))
	peek.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	checkStatus(t, "descriptor hits 0", h.call(t, peek).GetStatuses()[0], want{ok, 20, minute, 15})
	checkStatus(t, "hits 16 > remaining", h.call(t, req("shop", 16, desc("client_id", "h"))).GetStatuses()[0], want{over, 20, minute, 15})
	checkStatus(t, "hits 21 > quota", h.call(t, req("shop", 21, desc("client_id", "h"))).GetStatuses()[0], want{over, 20, minute, 0})
	huge := req("shop", 1, desc("client_id", "h"))
	huge.Descriptors[0].HitsAddend = wrapperspb.UInt64(math.MaxUint64)
	checkStatus(t, "hits 2^64-1", h.call(t, huge).GetStatuses()[0], want{over, 20, minute, 0})
	checkStatus(t, "hits 15", h.call(t, req("shop", 15, desc("client_id", "h"))).GetStatuses()[0], want{ok, 20, minute, 0})
}

// TestReplaces: a descriptor whose named limit another matched descriptor
// replaces is not checked.
func TestReplaces(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	minute := pb.RateLimitResponse_RateLimit_MINUTE
	for i := range 5 {
		resp := h.call(t, req("shop", 0, desc("plan", "gold"), desc("user", "u1")))
		w := want{ok, 4, minute, uint32(max(3-i, 0))}
		if i == 4 {
			w.code = over
		}
		checkStatus(t, "plan gold", resp.GetStatuses()[0], w)
		checkStatus(t, "replaced per_user", resp.GetStatuses()[1], want{code: ok})
	}
	// Alone, per_user applies (and was not charged above).
	checkStatus(t, "per_user alone", h.call(t, req("shop", 0, desc("user", "u1"))).GetStatuses()[0], want{ok, 2, minute, 1})
}

// TestWildcards: a trailing or inner '*' matches any run of bytes, each value
// with its own counter, or one shared counter with share_threshold; quota_mode
// descriptors fail the request only when all of them are over.
func TestWildcards(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	minute := pb.RateLimitResponse_RateLimit_MINUTE
	for i := range 4 {
		w := want{ok, 3, minute, uint32(max(2-i, 0))}
		if i == 3 {
			w.code = over
		}
		checkStatus(t, "/api/a", h.call(t, req("edge", 0, desc("path", "/api/a"))).GetStatuses()[0], w)
	}
	checkStatus(t, "/api/b has its own counter", h.call(t, req("edge", 0, desc("path", "/api/b"))).GetStatuses()[0], want{ok, 3, minute, 2})
	checkStatus(t, "/apix does not match", h.call(t, req("edge", 0, desc("path", "/apix"))).GetStatuses()[0], want{code: ok})

	checkStatus(t, "/img/a.png", h.call(t, req("edge", 0, desc("path", "/img/a.png"))).GetStatuses()[0], want{ok, 2, minute, 1})
	checkStatus(t, "/img/b/c.png shares", h.call(t, req("edge", 0, desc("path", "/img/b/c.png"))).GetStatuses()[0], want{ok, 2, minute, 0})
	checkStatus(t, "/img/d.png over", h.call(t, req("edge", 0, desc("path", "/img/d.png"))).GetStatuses()[0], want{over, 2, minute, 0})
	checkStatus(t, "/img/.png: the star matches nothing, shares", h.call(t, req("edge", 0, desc("path", "/img/.png"))).GetStatuses()[0], want{over, 2, minute, 0})
	checkStatus(t, "/img.png: prefix and suffix may not overlap", h.call(t, req("edge", 0, desc("path", "/img.png"))).GetStatuses()[0], want{code: ok})
	checkStatus(t, "/img/a.jpg does not match", h.call(t, req("edge", 0, desc("path", "/img/a.jpg"))).GetStatuses()[0], want{code: ok})

	h.call(t, req("edge", 0, desc("service", "search"), desc("service", "index")))
	resp := h.call(t, req("edge", 0, desc("service", "search"), desc("service", "index")))
	if resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetCode() != over {
		t.Errorf("one of two quota descriptors over: %v", resp)
	}
	resp = h.call(t, req("edge", 0, desc("service", "search")))
	if resp.GetOverallCode() != over {
		t.Errorf("the only quota descriptor over: %v", resp)
	}
}

// TestSlideFields: algorithm and window on a rate_limit, and usage rules on a
// descriptor.
func TestSlideFields(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	// sliding_log, 2 per 90 s: current_limit says 2 per 90 seconds.
	for i := range 3 {
		st := h.call(t, req("edge", 0, desc("login", "u"))).GetStatuses()[0]
		wantCode := ok
		if i == 2 {
			wantCode = over
		}
		cl := st.GetCurrentLimit()
		if st.GetCode() != wantCode || cl.GetRequestsPerUnit() != 2 || cl.GetUnit() != pb.RateLimitResponse_RateLimit_SECOND || cl.GetUnitMultiplier().GetValue() != 90 {
			t.Errorf("login %d: %v", i+1, st)
		}
		h.advance(time.Second)
	}
	h.advance(87 * time.Second) // t0+90s: the first entry (t0) leaves the log, the second (t0+1s) stays
	if st := h.call(t, req("edge", 0, desc("login", "u"))).GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != 0 {
		t.Errorf("login after 90 s: %v", st)
	}

	// token_bucket, 4 per second: a burst of 4, then one every 250 ms.
	for i := range 5 {
		st := h.call(t, req("edge", 0, desc("burst", "b"))).GetStatuses()[0]
		if (st.GetCode() == ok) != (i < 4) {
			t.Errorf("burst %d: %v", i+1, st)
		}
	}
	h.advance(250 * time.Millisecond)
	if st := h.call(t, req("edge", 0, desc("burst", "b"))).GetStatuses()[0]; st.GetCode() != ok {
		t.Errorf("burst after 250 ms: %v", st)
	}

	// A usage rule: deny a tenant whose cost over the last minute exceeds 100.
	now := time.Unix(0, h.now.Load())
	if err := h.store.ObserveAt(now.UnixMilli(), window.Event{TS: now.UnixMilli(), Metric: "cost", Key: "t1", Value: 150, Count: 1}); err != nil {
		t.Fatal(err)
	}
	resp := h.call(t, req("edge", 0, desc("tenant", "t1"), desc("tenant", "t2")))
	if resp.GetOverallCode() != over || resp.GetStatuses()[0].GetCode() != over || resp.GetStatuses()[1].GetCode() != ok {
		t.Errorf("usage rule: %v", resp)
	}
	if r := header(resp, "retry-after"); r == "" {
		t.Errorf("usage rule denial without retry-after: %v", resp.GetResponseHeadersToAdd())
	}
	// A value that cannot be a window key has no usage: allowed, not an error.
	for _, v := range []string{"", strings.Repeat("t", 300), "t\n1"} {
		if resp := h.call(t, req("edge", 0, desc("tenant", v))); resp.GetOverallCode() != ok {
			t.Errorf("usage rule, tenant %q: %v", limiterClip(v), resp)
		}
	}
}

func limiterClip(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

// TestResponseHeaders: draft-10 RateLimit and RateLimit-Policy for every
// decided descriptor, Retry-After when the request is over its limit.
func TestResponseHeaders(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	resp := h.call(t, req("shop", 0, desc("client_id", "hd"), desc("region", "us"), desc("health", "x")))
	if got, w := header(resp, "ratelimit-policy"), `"rls.shop.client_id";q=20;w=60, "rls.shop.region";q=10;w=3600`; got != w {
		t.Errorf("ratelimit-policy %q, want %q", got, w)
	}
	if got, w := header(resp, "ratelimit"), `"rls.shop.client_id";r=19;t=60, "rls.shop.region";r=9;t=3600`; got != w {
		t.Errorf("ratelimit %q, want %q", got, w)
	}
	if got := header(resp, "retry-after"); got != "" {
		t.Errorf("retry-after %q on OK", got)
	}
	for range 19 {
		h.call(t, req("shop", 0, desc("client_id", "hd")))
	}
	resp = h.call(t, req("shop", 0, desc("client_id", "hd")))
	if got := header(resp, "retry-after"); got != "60" {
		t.Errorf("retry-after %q, want 60 (59.75 s rounded up)", got)
	}
	if got, w := header(resp, "ratelimit"), `"rls.shop.client_id";r=0;t=60`; got != w {
		t.Errorf("ratelimit %q, want %q", got, w)
	}
}

// A request over its limit is told to retry when it would pass: when its rate
// descriptors free and, if every quota_mode descriptor is over, the first of those
// frees. A quota_mode descriptor over its hourly limit beside one that is not said
// Retry-After 3600 to a request that only a per-second limit held back.
func TestRetryAfterWithQuotaMode(t *testing.T) {
	cfg, err := rls.Parse([]byte(`domain: q
descriptors:
  - key: qa
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: qb
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: qc
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: rate
    rate_limit: {unit: second, requests_per_unit: 1}
`), "q.yaml", rls.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg})
	// t0 is 10:00:00.25: the second's window ends in 0.75 s, the minute's in 59.75 s,
	// the hour's in 3599.75 s.
	for _, c := range []struct {
		name  string
		descs [][]string
		code  pb.RateLimitResponse_Code
		retry string
	}{
		{"first", [][]string{desc("qa", "1"), desc("qb", "1"), desc("qc", "1"), desc("rate", "1")}, ok, ""},
		{"rate over, one quota over", [][]string{desc("qa", "1"), desc("qb", "1"), desc("rate", "1")}, over, "1"},
		{"every quota over: the first to free", [][]string{desc("qa", "1"), desc("qc", "1")}, over, "60"},
		{"and rate over", [][]string{desc("qa", "1"), desc("qc", "1"), desc("rate", "1")}, over, "60"},
	} {
		resp := h.call(t, req("q", 0, c.descs...))
		if resp.GetOverallCode() != c.code || header(resp, "retry-after") != c.retry {
			t.Errorf("%s: %s, retry-after %q; want %s, %q", c.name, resp.GetOverallCode(), header(resp, "retry-after"), c.code, c.retry)
		}
	}
}

// TestResponseHeadersFollowEachDecision: a limit reuses the headers it built
// last while the numbers stay the same (a hot key's denials), and builds new
// ones as soon as the remaining units, the seconds to the reset or the key change.
func TestResponseHeadersFollowEachDecision(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	check := func(key, rl, retry string) {
		t.Helper()
		resp := h.call(t, req("shop", 0, desc("client_id", key)))
		if got := header(resp, "ratelimit"); got != rl {
			t.Errorf("%s: ratelimit %q, want %q", key, got, rl)
		}
		if got := header(resp, "retry-after"); got != retry {
			t.Errorf("%s: retry-after %q, want %q", key, got, retry)
		}
		if got, w := header(resp, "ratelimit-policy"), `"rls.shop.client_id";q=20;w=60`; got != w {
			t.Errorf("%s: ratelimit-policy %q, want %q", key, got, w)
		}
	}
	for i := range 20 {
		check("hc", fmt.Sprintf(`"rls.shop.client_id";r=%d;t=60`, 19-i), "")
	}
	check("hc", `"rls.shop.client_id";r=0;t=60`, "60")
	check("hc", `"rls.shop.client_id";r=0;t=60`, "60")
	h.advance(30 * time.Second)
	check("hc", `"rls.shop.client_id";r=0;t=30`, "30")
	check("hc2", `"rls.shop.client_id";r=19;t=30`, "")
	check("hc", `"rls.shop.client_id";r=0;t=30`, "30")
	h.advance(30 * time.Second) // the next window
	check("hc", `"rls.shop.client_id";r=19;t=60`, "")
}

// TestAuthToken: with a token, ShouldRateLimit needs it as bearer metadata;
// health checks do not.
func TestAuthToken(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{}), token: "s3cret"})
	r := req("shop", 0, desc("client_id", "a"))
	wrong := [][]string{nil, {"authorization", "Bearer wrong"}, {"authorization", "s3cret"},
		{"authorization", "Bearer s3cre"}, {"authorization", "Bearer s3cretX"}, {"authorization", "bearer s3cret"}}
	for _, md := range wrong {
		ctx := context.Background()
		if md != nil {
			ctx = metadata.AppendToOutgoingContext(ctx, md...)
		}
		_, err := h.client.ShouldRateLimit(ctx, r)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("metadata %v: %v, want Unauthenticated", md, err)
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if resp, err := h.client.ShouldRateLimit(ctx, r); err != nil || resp.GetOverallCode() != ok {
		t.Errorf("with the token: %v, %v", resp, err)
	}
	if got := counter(t, h.reg, rls.MetricErrors, map[string]string{"reason": "unauthenticated"}); got != float64(len(wrong)) {
		t.Errorf("unauthenticated errors %v, want %d", got, len(wrong))
	}
}

// TestHostileRequests: empty domain, 10,000 descriptors, huge values, invalid
// UTF-8 and unsupported fields each get a gRPC error naming the problem, and
// the server keeps answering.
func TestHostileRequests(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	many := req("shop", 0)
	for i := range 10_000 {
		many.Descriptors = append(many.Descriptors, &rlv3.RateLimitDescriptor{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "client_id", Value: string(rune('a' + i%26))}}})
	}
	wide := req("shop", 0, desc())
	for range 100 {
		wide.Descriptors[0].Entries = append(wide.Descriptors[0].Entries, &rlv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	override := req("shop", 0, desc("client_id", "a"))
	override.Descriptors[0].Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	negative := req("shop", 0, desc("client_id", "a"))
	negative.Descriptors[0].IsNegativeHits = true
	cases := []struct {
		name string
		r    *pb.RateLimitRequest
		code codes.Code
		msg  string
	}{
		{"empty domain", req("", 0, desc("client_id", "a")), codes.InvalidArgument, "domain must not be empty"},
		{"no descriptors", req("shop", 0), codes.InvalidArgument, "descriptor list must not be empty"},
		{"10,000 descriptors", many, codes.InvalidArgument, "10000 descriptors, more than 128"},
		{"100 entries", wide, codes.InvalidArgument, "100 entries, more than 32"},
		{"huge value", req("shop", 0, desc("client_id", strings.Repeat("x", 5000))), codes.InvalidArgument, "over 4096 bytes"},
		{"huge domain", req(strings.Repeat("d", 5000), 0, desc("client_id", "a")), codes.InvalidArgument, "more than 4096"},
		{"2 MiB message", req("shop", 0, desc("client_id", strings.Repeat("x", 2<<20))), codes.ResourceExhausted, "larger than max"},
		{"limit override without a unit", override, codes.InvalidArgument, "limit override unit UNKNOWN: want SECOND"},
		{"negative hits", negative, codes.InvalidArgument, "is_negative_hits is not supported"},
	}
	for _, c := range cases {
		_, err := h.client.ShouldRateLimit(context.Background(), c.r)
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.code, c.msg)
		}
	}
	// Invalid UTF-8 cannot be sent by a Go client (it validates), so the bytes
	// are written by hand: a domain is configuration, so one that is not UTF-8
	// is refused as the client's fault (it was Internal, gRPC's answer to any
	// codec error); keys and values come from headers and are decided
	// (TestNonUTF8ValuesAreDecided).
	in := rawMsg(rawRequest("sh\xffop", "client_id", "a"))
	err := h.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &in, new(rawMsg), rawCodecOption())
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "domain is not valid UTF-8") {
		t.Errorf("invalid UTF-8 domain: %v, want InvalidArgument", err)
	}
	// A value over the limiter's 256-byte key bound is hashed into the key and decided.
	long := strings.Repeat("v", 3000)
	if st := h.call(t, req("shop", 0, desc("client_id", long))).GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != 19 {
		t.Errorf("3,000-byte value: %v", st)
	}
	if st := h.call(t, req("shop", 0, desc("client_id", long))).GetStatuses()[0]; st.GetLimitRemaining() != 18 {
		t.Errorf("3,000-byte value again: %v (not the same counter)", st)
	}
	if st := h.call(t, req("shop", 0, desc("client_id", "a\x00b\n"))).GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != 19 {
		t.Errorf("control characters: %v", st)
	}
	if got := counter(t, h.reg, rls.MetricErrors, map[string]string{"reason": "invalid_request"}); got != 9 {
		t.Errorf("invalid_request errors %v, want 9", got)
	}
	// Still serving.
	if resp := h.call(t, req("shop", 0, desc("client_id", "after"))); resp.GetOverallCode() != ok {
		t.Errorf("after the hostile requests: %v", resp)
	}
}

// TestMalformedRequests: bytes that are not a RateLimitRequest, sent over a real
// gRPC connection, are InvalidArgument with the decoder's reason, counted as
// invalid_request (gRPC's own answer to a codec error is Internal); with a
// token, a client without it is Unauthenticated first. Health checks, which
// share the codec, still answer, and so does a good request.
func TestMalformedRequests(t *testing.T) {
	for _, token := range []string{"", "s3cret"} {
		h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{}), token: token})
		valid := rawRequest("shop", "client_id", "a")
		notUTF8 := rawRequest("shop", "client_id", "\xff\xfe")
		authed := context.Background()
		if token != "" {
			authed = metadata.AppendToOutgoingContext(authed, "authorization", "Bearer "+token)
		}
		cases := []struct {
			name string
			in   []byte
			msg  string
		}{
			{"garbage", []byte{0xff, 0xff, 0xff, 0xff}, "malformed rate limit request"},
			{"text", []byte("GET / HTTP/1.1\r\n"), "malformed rate limit request"},
			{"truncated", valid[:len(valid)-3], "malformed rate limit request"},
			{"length past the end", append([]byte{0x12, 0x7f}, valid...), "malformed rate limit request"},
			{"field number 0", []byte{0x00, 0x01}, "malformed rate limit request"},
			{"invalid UTF-8 domain", rawRequest("\xff", "client_id", "a"), "domain is not valid UTF-8"},
			{"a value not UTF-8, truncated", notUTF8[:len(notUTF8)-1], "malformed rate limit request"},
		}
		for _, c := range cases {
			in := rawMsg(c.in)
			err := h.conn.Invoke(authed, pb.RateLimitService_ShouldRateLimit_FullMethodName, &in, new(rawMsg), rawCodecOption())
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.msg) {
				t.Errorf("token %q, %s: %v, want InvalidArgument containing %q", token, c.name, err, c.msg)
			}
			if token != "" {
				err := h.conn.Invoke(context.Background(), pb.RateLimitService_ShouldRateLimit_FullMethodName, &in, new(rawMsg), rawCodecOption())
				if status.Code(err) != codes.Unauthenticated {
					t.Errorf("%s without the token: %v, want Unauthenticated", c.name, err)
				}
			}
		}
		if got := counter(t, h.reg, rls.MetricErrors, map[string]string{"reason": "invalid_request"}); got != float64(len(cases)) {
			t.Errorf("token %q: invalid_request errors %v, want %d", token, got, len(cases))
		}
		in, out := rawMsg(valid), rawMsg(nil)
		if err := h.conn.Invoke(authed, pb.RateLimitService_ShouldRateLimit_FullMethodName, &in, &out, rawCodecOption()); err != nil {
			t.Fatalf("token %q: a good request: %v", token, err)
		}
		var resp pb.RateLimitResponse
		if err := proto.Unmarshal(out, &resp); err != nil || resp.GetOverallCode() != ok {
			t.Errorf("token %q: a good request: %v, %v", token, &resp, err)
		}
		hc, err := healthpb.NewHealthClient(h.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: rls.ServiceName})
		if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("token %q: health: %v, %v", token, hc, err)
		}
	}
}

// overridden is a request of one descriptor carrying Envoy's limit override.
func overridden(domain string, perUnit uint32, unit typev3.RateLimitUnit, hits uint64, kv ...string) *pb.RateLimitRequest {
	r := req(domain, 0, desc(kv...))
	r.Descriptors[0].Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: perUnit, Unit: unit}
	if hits > 0 {
		r.Descriptors[0].HitsAddend = wrapperspb.UInt64(hits)
	}
	return r
}

// TestLimitOverride: a descriptor's own limit (RateLimitDescriptor.limit)
// replaces the configured one, as in envoyproxy/ratelimit: a fixed window of
// requests_per_unit per unit, counted apart from the configured limit's
// counter, with hits_addend as its cost; 0 per unit is always over; in an
// unknown domain it is ignored (OK, no limit).
func TestLimitOverride(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	for i := range 5 {
		resp := h.call(t, overridden("shop", 3, typev3.RateLimitUnit_MINUTE, 0, "client_id", "a"))
		st := resp.GetStatuses()[0]
		wantOK := i < 3
		if (resp.GetOverallCode() == ok) != wantOK || (st.GetCode() == ok) != wantOK {
			t.Errorf("override request %d: %v, want ok=%v", i+1, resp, wantOK)
		}
		if cl := st.GetCurrentLimit(); cl.GetRequestsPerUnit() != 3 || cl.GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE {
			t.Errorf("override request %d: current_limit %v, want 3 per MINUTE", i+1, cl)
		}
		if wantOK && st.GetLimitRemaining() != uint32(2-i) {
			t.Errorf("override request %d: remaining %d, want %d", i+1, st.GetLimitRemaining(), 2-i)
		}
	}
	// The configured limit (20 a minute) of the same descriptor was not charged.
	if st := h.call(t, req("shop", 0, desc("client_id", "a"))).GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != 19 {
		t.Errorf("configured limit after the overrides: %v, want OK with 19 remaining", st)
	}
	// hits_addend is the cost: 4 of 5 per second, then 2 more is over, 1 fits.
	if st := h.call(t, overridden("shop", 5, typev3.RateLimitUnit_SECOND, 4, "client_id", "b")).GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != 1 {
		t.Errorf("hits_addend 4 of 5: %v", st)
	}
	if st := h.call(t, overridden("shop", 5, typev3.RateLimitUnit_SECOND, 2, "client_id", "b")).GetStatuses()[0]; st.GetCode() != over {
		t.Errorf("hits_addend 2 more: %v, want OVER_LIMIT", st)
	}
	if st := h.call(t, overridden("shop", 5, typev3.RateLimitUnit_SECOND, 1, "client_id", "b")).GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != 0 {
		t.Errorf("hits_addend 1 more: %v, want OK with 0 remaining (a denial counts nothing)", st)
	}
	// The next second is a new window.
	h.now.Add(int64(time.Second))
	if st := h.call(t, overridden("shop", 5, typev3.RateLimitUnit_SECOND, 5, "client_id", "b")).GetStatuses()[0]; st.GetCode() != ok {
		t.Errorf("next second: %v, want OK", st)
	}
	// A descriptor the file does not know gets the override too; 0 per unit is always over.
	if resp := h.call(t, overridden("shop", 0, typev3.RateLimitUnit_HOUR, 0, "nowhere", "x")); resp.GetOverallCode() != over {
		t.Errorf("0 per hour: %v, want OVER_LIMIT", resp)
	}
	if resp := h.call(t, overridden("nosuchdomain", 0, typev3.RateLimitUnit_HOUR, 0, "client_id", "a")); resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Errorf("override in an unknown domain: %v, want OK without a limit", resp)
	}
	if got := counter(t, h.reg, rls.MetricDescriptors, map[string]string{"domain": "shop", "descriptor": "override", "result": "over_limit"}); got != 4 {
		t.Errorf("override over_limit descriptors %v, want 4", got)
	}
}
