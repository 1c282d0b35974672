package rls_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// TestPolicyMapping: each rate_limit becomes one policy named rls.DOMAIN.PATH
// (hashed when that is not a valid name), fixed_window over the unit unless
// the file says otherwise, on the default backend.
func TestPolicyMapping(t *testing.T) {
	cfg := loadTestConfig(t, rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if got := cfg.Domains(); !slices.Equal(got, []string{"edge", "shop"}) {
		t.Errorf("domains %v", got)
	}
	byName := map[string]limiter.Policy{}
	var names []string
	for _, p := range cfg.Policies() {
		byName[p.Name] = p
		names = append(names, p.Name)
	}
	for name, w := range map[string]limiter.Policy{
		"rls.shop.client_id":                           {Algorithm: limiter.FixedWindow, Limit: 20, Window: time.Minute},
		"rls.shop.client_id_partner":                   {Algorithm: limiter.FixedWindow, Limit: 30, Window: time.Minute},
		"rls.shop.tenant_acme.path":                    {Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Second},
		"rls.shop.tenant_acme.path_-checkout-27ce4dfd": {},
		"rls.shop.ip_10.0.0.66":                        {Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Minute, Shadow: true},
		"rls.edge.login":                               {Algorithm: limiter.SlidingLog, Limit: 2, Window: 90 * time.Second},
		"rls.edge.burst":                               {Algorithm: limiter.TokenBucket, Capacity: 4, RefillPerSecond: 4},
	} {
		p, found := byName[name]
		if !found {
			t.Errorf("no policy %q in %v", name, names)
			continue
		}
		if w.Algorithm == 0 {
			continue // only its name is checked
		}
		if p.Algorithm != w.Algorithm || p.Limit != w.Limit || p.Window != w.Window || p.Capacity != w.Capacity ||
			p.RefillPerSecond != w.RefillPerSecond || p.Shadow != w.Shadow || p.Backend != limiter.BackendRedis {
			t.Errorf("policy %s: %+v, want %+v on redis", name, p, w)
		}
		if !strings.HasPrefix(p.Source, "testdata/config/") {
			t.Errorf("policy %s: source %q", name, p.Source)
		}
	}
	if _, found := byName["rls.shop.health"]; found {
		t.Error("an unlimited descriptor got a policy")
	}
	rules := cfg.Rules()
	if len(rules) != 1 || rules[0].Name != "rls.edge.tenant.rule1" || rules[0].Metric != "cost" {
		t.Errorf("rules %+v", rules)
	}
}

// TestConfigErrors: every problem names its file and line; the checks
// envoyproxy/ratelimit makes are made with its wording where it has one.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"empty domain", "domain: ''\ndescriptors: []\n", "x.yaml:1: config file cannot have empty domain"},
		{"empty key", "domain: d\ndescriptors:\n  - value: v\n", "x.yaml:3: descriptor has empty key"},
		{"duplicate key", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n", "x.yaml:4: duplicate descriptor composite key 'd.k' (first at x.yaml:3): merge the two, or give one another value or its own nesting"},
		{"duplicate nested wildcard", "domain: d\ndescriptors:\n  - key: t\n    descriptors:\n      - {key: p, value: /a*}\n      - {key: p, value: /a*}\n", "x.yaml:6: duplicate descriptor composite key 'd.t.p_/a*' (first at x.yaml:5)"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "x.yaml:4: invalid rate limit unit 'fortnight': want second, minute, hour, day, week, month or year (or window:, e.g. 90s or calendar_month)"},
		{"no unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", "x.yaml:4: rate_limit needs a unit (second, minute, hour, day, week, month or year) or a window (e.g. 90s or calendar_month)"},
		{"unlimited with unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", "should not specify rate limit unit when unlimited"},
		{"replaces self", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: a\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: a}]\n", "x.yaml:8: replaces should not contain name of same descriptor"},
		{"replaces empty", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: ''}]\n", "should not have an empty replaces entry"},
		{"misspelled field", "domain: d\ndescriptors:\n  - key: k\n    ratelimit: {}\n", `x.yaml:4: descriptor: unknown field "ratelimit"`},
		{"share without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", "share_threshold can only be used with wildcard values"},
		{"negative requests", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", "requests_per_unit must be a whole number"},
		{"unit and window", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, window: 2s, requests_per_unit: 1}\n", "give unit or window, not both"},
		{"bad window", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: soon, requests_per_unit: 1}\n", `x.yaml:4: window "soon" is not a duration such as 90s, 5m, 1h or 7d`},
		{"zero window", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: 0s, requests_per_unit: 1}\n", "x.yaml:4: window 0s must be positive"},
		{"bad algorithm", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: magic}\n", `unknown algorithm "magic"`},
		{"sliding log too big", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 200000, algorithm: sliding_log}\n", `x.yaml:4: policy "rls.d.k": limit: must be between 1 and 100000`},
		{"rules on unlimited", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n    rules: [{metric: cost, agg: sum, window: 1m, max: 1}]\n", "rules do not apply to an unlimited descriptor"},
		{"bad rule", "domain: d\ndescriptors:\n  - key: k\n    rules: [{metric: cost, agg: median, window: 1m, max: 1}]\n", "agg"},
		{"not YAML", "domain: [\n", "x.yaml:1: not YAML"},
		{"empty", "", "x.yaml:1: empty file"},
		{"list root", "- a\n", "config must be a mapping"},
		{"memory on_backend_error", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, backend: memory, on_backend_error: local}\n", "applies only to backend redis"},
	} {
		_, err := rls.Parse([]byte(c.yaml), "x.yaml", rls.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, rls.ErrInvalidConfig) && !errors.Is(err, limiter.ErrInvalidPolicy) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// A window in days reads as window.ParseWindow reads it everywhere.
	if _, err := rls.Parse([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: 1d, requests_per_unit: 1}\n"), "x.yaml", rls.LoadOptions{}); err != nil {
		t.Errorf("window: 1d: %v", err)
	}
	// on_backend_error on a limit that is in memory only because there is no
	// Redis is ignored, so one file serves both.
	if _, err := rls.Parse([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, on_backend_error: closed, timeout: 20ms}\n"), "x.yaml", rls.LoadOptions{}); err != nil {
		t.Errorf("on_backend_error without Redis: %v", err)
	}
}

// TestLoadDirectory: a directory loads every YAML file; a domain in two files
// is refused with both places.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: two\n")
	write("notes.txt", "not a config")
	cfg, err := rls.Load(dir, rls.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Domains(); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("domains %v", got)
	}
	write("c.yaml", "domain: one\n")
	if _, err := rls.Load(dir, rls.LoadOptions{}); err == nil || !strings.Contains(err.Error(), `c.yaml:1: duplicate domain "one" (first defined at `+filepath.Join(dir, "a.yaml")+":1)") {
		t.Errorf("duplicate domain: %v", err)
	}
	if _, err := rls.Load(t.TempDir(), rls.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "no *.yaml") {
		t.Errorf("empty directory: %v", err)
	}
}

// TestHealthAndReflection: the standard health service answers SERVING for
// the server and the rate limit service, and reflection lists the service.
func TestHealthAndReflection(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{}), token: "tok"})
	hc := grpc_health_v1.NewHealthClient(h.conn)
	for _, svc := range []string{"", rls.ServiceName} {
		resp, err := hc.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v, %v", svc, resp, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, rls.ServiceName) || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %v", names)
	}
	_ = stream.CloseSend()
}

// TestRequestsPerUnitAsYAMLReadsIt: requests_per_unit is read as YAML reads an
// integer (envoyproxy/ratelimit's yaml decoder does): 1_000_000, 0x10 and +5
// load; a quoted number still does. They were refused as "must be a whole
// number", read as decimal digits only.
func TestRequestsPerUnitAsYAMLReadsIt(t *testing.T) {
	for in, want := range map[string]int64{"1_000_000": 1000000, "0x10": 16, "+5": 5, "'7'": 7, "4294967295": 4294967295} {
		cfg, err := rls.Parse([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: "+in+"}\n"), "x.yaml", rls.LoadOptions{})
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if p := cfg.Policies(); len(p) != 1 || p[0].Limit != want {
			t.Errorf("%s: policies %+v, want a limit of %d", in, p, want)
		}
	}
	for _, in := range []string{"-3", "3.5", "4294967296", "[3]", "'3x'"} {
		_, err := rls.Parse([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: "+in+"}\n"), "x.yaml", rls.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), "x.yaml:4: requests_per_unit must be a whole number from 0 to 4294967295") {
			t.Errorf("%s: %v, want the whole-number error", in, err)
		}
	}
}
