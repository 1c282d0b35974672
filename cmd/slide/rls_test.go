package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/internal/redistest"
)

const serveRLSConfig = `domain: web
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 3
      on_backend_error: closed  # a slow Redis fails the test instead of passing as a degraded OK
      timeout: 5s
`

// TestServeRateLimitService: slide serve --grpc-addr --rls-config answers
// Envoy's ShouldRateLimit from Redis with the bearer token, exports the rls
// metrics, shares the policies with POST /v1/allow, and stops on shutdown.
func TestServeRateLimitService(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	cfgPath, tokenPath := filepath.Join(dir, "rls.yaml"), filepath.Join(dir, "token")
	if err := os.WriteFile(cfgPath, []byte(serveRLSConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenPath, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, grpcAddr, kafkaAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var errb proctest.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--embedded-kafka-addr", kafkaAddr, "--embedded-kafka-partitions", "1",
			"--grpc-addr", grpcAddr, "--rls-config", cfgPath, "--redis", rs.Addr, "--auth-token-file", tokenPath},
			stdio{strings.NewReader(""), io.Discard, &errb})
	}()
	resp := waitHTTP(t, "http://"+addr+"/healthz")
	resp.Body.Close()

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	r := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.1.2.3"}}}}}
	if _, err := client.ShouldRateLimit(context.Background(), r); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without the token: %v, want Unauthenticated\n%s", err, errb.String())
	}
	authed := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok")
	var got []pb.RateLimitResponse_Code
	for range 4 {
		resp, err := client.ShouldRateLimit(authed, r)
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v\n%s", err, errb.String())
		}
		got = append(got, resp.GetOverallCode())
	}
	if want := []pb.RateLimitResponse_Code{1, 1, 1, 2}; !equalCodes(got, want) {
		t.Errorf("codes %v, want %v", got, want)
	}
	// A limit override from Envoy counts in Redis too.
	or := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: r.Descriptors[0].Entries,
		Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}}}}
	for i, want := range []pb.RateLimitResponse_Code{1, 2} {
		if resp, err := client.ShouldRateLimit(authed, or); err != nil || resp.GetOverallCode() != want {
			t.Errorf("override request %d: %v, %v; want %v", i+1, resp, err, want)
		}
	}
	if keys, _ := rs.Do("KEYS", "*"); !strings.Contains(keys, "rls.web.remote_address") || !strings.Contains(keys, "rls-override.minute") {
		t.Errorf("Redis keys %q: the limit or the override is not in Redis", keys)
	}
	exp, err := proctest.Scrape("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := proctest.Metric(exp, "slide_rls_requests_total", `code="OVER_LIMIT"`); n != 2 { // the limit's and the override's
		t.Errorf("slide_rls_requests_total{code=OVER_LIMIT} %v, want 2", n)
	}
	if n, _ := proctest.Metric(exp, "slide_limiter_decisions_total", `policy="rls.web.remote_address"`, `result="denied"`); n != 1 {
		t.Errorf("limiter denied decisions %v, want 1", n)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	short, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	if _, err := client.ShouldRateLimit(short, r); err == nil {
		t.Error("gRPC still answering after shutdown")
	}
}

func equalCodes(a, b []pb.RateLimitResponse_Code) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestServeRefusesBadRateLimitServiceFlags(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rls-config", bad}, "--rls-config needs --grpc-addr"},
		{[]string{"--grpc-addr", "127.0.0.1:0"}, "--grpc-addr needs --rls-config"},
		{[]string{"--grpc-addr", "127.0.0.1:0", "--rls-config", bad}, "bad.yaml:4: invalid rate limit unit 'fortnight'"},
		{[]string{"--grpc-addr", "127.0.0.1:0", "--rls-config", "/nonexistent"}, "--rls-config"},
		{[]string{"--rls-response-headers"}, "--rls-response-headers needs --rls-config"},
		{[]string{"--rls-response-header-names", "A,B,C"}, "--rls-response-header-names needs --rls-response-headers"},
		{[]string{"--grpc-addr", "127.0.0.1:0", "--rls-config", bad, "--rls-response-headers", "--rls-response-header-names", "A,B"}, "want three names"},
		{[]string{"--grpc-addr", "127.0.0.1:0", "--rls-config", bad, "--rls-response-headers", "--rls-response-header-names", "A,RateLimit,C"}, "used twice"},
	} {
		code, _, errOut := runCmd(t, context.Background(), "", append([]string{"serve", "--addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0"}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 with %q", c.args, code, errOut, c.want)
		}
	}
}

// TestServeRateLimitServiceBlockOnly: a file whose descriptors only block
// (requests_per_unit 0) or exempt (unlimited) has limits to serve, as
// envoyproxy/ratelimit serves it: every request of the blocked key is over its
// limit, and a limit override from Envoy counts in --redis. It was refused at
// start as having "no rate limit".
func TestServeRateLimitServiceBlockOnly(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "block.yaml")
	if err := os.WriteFile(cfgPath, []byte("domain: web\ndescriptors:\n  - key: remote_address\n    value: 10.6.6.6\n    rate_limit: {unit: minute, requests_per_unit: 0}\n  - key: health\n    rate_limit: {unlimited: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, grpcAddr, kafkaAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var errb proctest.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--embedded-kafka-addr", kafkaAddr, "--embedded-kafka-partitions", "1",
			"--grpc-addr", grpcAddr, "--rls-config", cfgPath, "--redis", rs.Addr}, stdio{strings.NewReader(""), io.Discard, &errb})
	}()
	ready := time.Now().Add(20 * time.Second)
	for {
		if r, err := http.Get("http://" + addr + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(ready) {
			t.Fatalf("serve did not start: %s", errb.String())
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	for value, want := range map[string]pb.RateLimitResponse_Code{"10.6.6.6": pb.RateLimitResponse_OVER_LIMIT, "10.1.1.1": pb.RateLimitResponse_OK} {
		r := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: value}}}}}
		resp, err := client.ShouldRateLimit(context.Background(), r)
		if err != nil || resp.GetOverallCode() != want {
			t.Errorf("remote_address %s: %v, %v; want %v", value, resp.GetOverallCode(), err, want)
		}
	}
	or := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.1.1.1"}},
		Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}}}}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if resp, err := client.ShouldRateLimit(context.Background(), or); err != nil || resp.GetOverallCode() != want {
			t.Errorf("override request %d: %v, %v; want %v", i+1, resp.GetOverallCode(), err, want)
		}
	}
	if keys, _ := rs.Do("KEYS", "*"); !strings.Contains(keys, "rls-override.minute") {
		t.Errorf("Redis keys %q: the override is not counted in --redis", keys)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestServeSIGHUPKeepsServing: a SIGHUP (a reload hook's `kill -HUP`) leaves slide serve
// running and reloads --rls-config: a raised limit applies to the next request over gRPC,
// and a broken file keeps the config in use, logged with its line and counted. Without a
// handler Go's default for SIGHUP ended the process at once: no drain, no log line.
func TestServeSIGHUPKeepsServing(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "rls.yaml")
	write := func(limit string) {
		t.Helper()
		body := "domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: " + limit + "}\n"
		if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	grpcAddr := freeAddr(t)
	s := startServe(t, "--embedded-kafka-addr", "127.0.0.1:0", "--embedded-kafka-partitions", "1", "--grpc-addr", grpcAddr, "--rls-config", cfgPath)
	get(t, http.DefaultClient, "http://"+s.addr+"/healthz")
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	r := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.1.1.1"}}}}}
	decide := func(want pb.RateLimitResponse_Code, when string) {
		t.Helper()
		if resp, err := client.ShouldRateLimit(context.Background(), r); err != nil || resp.GetOverallCode() != want {
			t.Fatalf("%s: %v, %v; want %v", when, resp.GetOverallCode(), err, want)
		}
	}
	hup := func(logLine string) {
		t.Helper()
		if err := syscallHUP(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.logs.String(), logLine); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no log line %q for the SIGHUP:\n%s", logLine, s.logs.String())
			}
		}
	}
	decide(pb.RateLimitResponse_OK, "1 of 1")
	decide(pb.RateLimitResponse_OVER_LIMIT, "2 of 1")
	write("3")
	hup("--rls-config reloaded: domains 1 → 1, descriptors 1 → 1; changed: web.remote_address")
	decide(pb.RateLimitResponse_OK, "2 of 3 after SIGHUP")
	if err := os.WriteFile(cfgPath, []byte("domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup("rls.yaml:4: invalid rate limit unit")
	decide(pb.RateLimitResponse_OK, "3 of 3 after a broken file")
	decide(pb.RateLimitResponse_OVER_LIMIT, "4 of 3 after a broken file")
	// The edits are seen by the change check too, so each may be counted twice.
	_, metrics := get(t, http.DefaultClient, "http://"+s.addr+"/metrics")
	for _, want := range []string{`slide_rls_config_reloads_total{result="applied"} [12]\n`, `slide_rls_config_reloads_total{result="refused"} [12]\n`} {
		if !regexp.MustCompile(want).MatchString(metrics) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestServeReloadsRLSConfigOnConfigMapSwap: --rls-config as Kubernetes mounts a ConfigMap
// (a directory whose files link through ..data to a timestamped directory, updated by
// swapping ..data) is reloaded when it changes, without a SIGHUP, which nobody can send in
// the distroless image: a raised limit applies, then a broken version keeps the config in
// use, logged with its line and counted. Before, only SIGHUP reloaded it: an edited
// ConfigMap never applied until a restart.
func TestServeReloadsRLSConfigOnConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, body string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "web.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		// As the kubelet does: a new link renamed over ..data, atomically.
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	limit := func(n int) string {
		return "domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: " + strconv.Itoa(n) + "}\n"
	}
	version("..2026_12_03_10_00_00.1", limit(1))
	if err := os.Symlink("..data/web.yaml", filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	grpcAddr := freeAddr(t)
	s := startServe(t, "--embedded-kafka-addr", "127.0.0.1:0", "--embedded-kafka-partitions", "1", "--grpc-addr", grpcAddr, "--rls-config", dir)
	get(t, http.DefaultClient, "http://"+s.addr+"/healthz")
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	ask := func(addr string) pb.RateLimitResponse_Code {
		t.Helper()
		r := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: addr}}}}}
		resp, err := client.ShouldRateLimit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOverallCode()
	}
	// limited: whether a fresh key gets over the limit at its second request.
	fresh := 0
	limited := func() bool {
		fresh++
		addr := "10.0.0." + strconv.Itoa(fresh)
		return ask(addr) == pb.RateLimitResponse_OK && ask(addr) == pb.RateLimitResponse_OVER_LIMIT
	}
	if !limited() {
		t.Fatal("want 1 of 1 OK, 2 of 1 over the limit")
	}

	version("..2026_12_03_10_05_00.2", limit(1000))
	for deadline := time.Now().Add(20 * time.Second); limited(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the ConfigMap's new limit never applied without a SIGHUP:\n%s", s.logs.String())
		}
	}
	if !strings.Contains(s.logs.String(), "--rls-config changed: --rls-config reloaded") {
		t.Errorf("no log line for the reload:\n%s", s.logs.String())
	}

	version("..2026_12_03_10_10_00.3", "domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight}\n")
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(s.logs.String(), "web.yaml:4: invalid rate limit unit"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a broken ConfigMap was not reported:\n%s", s.logs.String())
		}
	}
	if limited() {
		t.Error("a broken ConfigMap replaced the limit in use")
	}
	_, metrics := get(t, http.DefaultClient, "http://"+s.addr+"/metrics")
	for _, want := range []string{`slide_rls_config_reloads_total{result="applied"} 1`, `slide_rls_config_reloads_total{result="refused"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestServeRLSResponseHeaders: --rls-response-headers adds envoyproxy/ratelimit's
// limit, remaining and reset headers, named by --rls-response-header-names, to
// the answers of slide serve's rate limit service.
func TestServeRLSResponseHeaders(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(cfgPath, []byte("domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	grpcAddr := freeAddr(t)
	s := startServe(t, "--embedded-kafka-addr", "127.0.0.1:0", "--embedded-kafka-partitions", "1", "--grpc-addr", grpcAddr, "--rls-config", cfgPath,
		"--rls-response-headers", "--rls-response-header-names", "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset")
	get(t, http.DefaultClient, "http://"+s.addr+"/healthz")
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.1.1.1"}}}}}
	for i, code := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(), r)
		if err != nil || resp.GetOverallCode() != code {
			t.Fatalf("request %d: %v, %v; want %v", i+1, resp.GetOverallCode(), err, code)
		}
		got := map[string]string{}
		for _, h := range resp.GetResponseHeadersToAdd() {
			got[h.GetKey()] = h.GetValue()
		}
		reset, err := strconv.Atoi(got["X-RateLimit-Reset"])
		if got["X-RateLimit-Limit"] != "1" || got["X-RateLimit-Remaining"] != "0" || err != nil || reset < 1 || reset > 3600 {
			t.Errorf("request %d: headers %v, want X-RateLimit-Limit 1, X-RateLimit-Remaining 0, X-RateLimit-Reset 1 to 3600", i+1, got)
		}
	}
}
