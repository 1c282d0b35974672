package rls_test

import (
	"context"
	"math"
	"os"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// FuzzParse: no input makes the config loader panic, and whatever it accepts
// builds a limiter service (valid, uniquely named policies).
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/config/shop.yaml", "testdata/config/edge.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(redisConfig))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: 'a*b*c'\n    share_threshold: true\n    rate_limit: {unit: day, requests_per_unit: 0}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true}, descriptors: [{key: x, rules: [{metric: m, agg: p99, window: 10s, max: 1}]}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := rls.Parse(data, "fuzz.yaml", rls.LoadOptions{})
		if err != nil {
			return
		}
		ps := cfg.Policies()
		if len(ps) == 0 {
			return
		}
		if _, err := limiter.NewService(limiter.Config{Policies: ps}); err != nil {
			t.Fatalf("accepted a config the limiter refuses: %v\n%s", err, data)
		}
	})
}

// FuzzShouldRateLimit: no request, as wire bytes, makes ShouldRateLimit panic;
// an answer has one status per descriptor, and an error is a gRPC status.
func FuzzShouldRateLimit(f *testing.F) {
	cfg, err := rls.Load("testdata/config", rls.LoadOptions{})
	if err != nil {
		f.Fatal(err)
	}
	h := start(f, setup{cfg: cfg}) // the Server is called directly below, not over gRPC
	s := h.server
	for _, r := range []*pb.RateLimitRequest{
		req("shop", 0, desc("client_id", "c1")),
		req("shop", 3, desc("tenant", "acme", "path", "/checkout"), desc("plan", "gold"), desc("user", "u")),
		req("edge", 0, desc("path", "/img/a.png"), desc("service", "search"), desc("tenant", "t1")),
		req("edge", 1, desc("login", "x|y\\z"), desc("burst", "")),
		req("", 0),
		overridden("shop", 3, typev3.RateLimitUnit_MINUTE, 2, "client_id", "c1"),
		overridden("shop", math.MaxUint32, typev3.RateLimitUnit_YEAR, math.MaxUint64, "x", "y"),
		overridden("shop", 0, typev3.RateLimitUnit_UNKNOWN, 0, "client_id", "c1"),
	} {
		data, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, byte(0))
		f.Add(data, byte(0xe9))
	}
	f.Fuzz(func(t *testing.T, data []byte, junk byte) {
		var r pb.RateLimitRequest
		if proto.Unmarshal(data, &r) != nil {
			return // gRPC refuses it before the handler
		}
		if junk >= 0x80 { // keys and values that are not UTF-8, as Envoy copies them from headers (decodeLenient)
			for _, d := range r.GetDescriptors() {
				for i, e := range d.GetEntries() {
					if i%2 == 0 {
						e.Value += string([]byte{junk})
					} else {
						e.Key += string([]byte{junk})
					}
				}
			}
		}
		resp, err := s.ShouldRateLimit(context.Background(), &r)
		if err != nil {
			if _, isStatus := status.FromError(err); !isStatus {
				t.Fatalf("not a gRPC status: %v", err)
			}
			return
		}
		if len(resp.GetStatuses()) != len(r.GetDescriptors()) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(r.GetDescriptors()))
		}
	})
}
