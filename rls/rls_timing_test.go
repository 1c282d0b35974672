package rls_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
	"github.com/slide-metrics/slide/rls"
)

// benchConfig is the configuration of the ShouldRateLimit benchmarks, in
// envoyproxy/ratelimit's format so the same file serves a side-by-side run:
// random keys far under a fixed-window limit, and hot keys of 100 a minute.
const benchConfig = `domain: bench
descriptors:
  - key: random
    rate_limit:
      unit: minute
      requests_per_unit: 1000000000
  - key: hot
    rate_limit:
      unit: minute
      requests_per_unit: 100
`

// benchStreams is the number of concurrent callers (Envoy's 16 streams).
const benchStreams = 16

// benchConns is the number of gRPC connections the callers share.
const benchConns = 4

// hotRound and hotRun make every hot-key run use fresh keys, also across test
// processes sharing one redis-server, so a key gets exactly 1,000 requests at
// a limit of 100: 10× its limit however fast the server is.
var (
	hotRound atomic.Int64
	hotRun   = strconv.FormatInt(time.Now().UnixNano(), 36)
)

// BenchmarkShouldRateLimit measures ShouldRateLimit over loopback gRPC from
// 16 concurrent callers on 4 connections, one descriptor per request, with
// the limits in one redis-server: "random" spreads requests over 1,000 keys of
// a fixed window far under its limit, "hot" sends each key 1,000 requests at
// a limit of 100 (10×). ours is slide's rls.Server; anchor is the same gRPC
// service answering with a bare pipelined INCRBY + EXPIRE per descriptor
// (envoyproxy/ratelimit's Redis protocol, without its config lookup and
// stats), the least a fixed-window server must do per decision. Metrics:
// decisions/s, p99_ms per call, and redis_cpu_us/decision, redis-server's CPU
// time per decision (INFO cpu, user + sys). Each target and load runs with two
// load generators: grpc-go's client (TARGET_LOAD) and the frames generator
// (TARGET_LOAD_frames, h2Conn), whose CPU per call is about half of grpc-go's,
// which matters where generator and servers share the cores.
//
// SLIDE_RLS_BENCH_REDIS=host:port uses that redis-server instead of starting
// one; SLIDE_RLS_BENCH_TARGET=host:port (or NAME=host:port,NAME=host:port)
// adds variants "external" (or NAME) against other ShouldRateLimit servers
// loaded with benchConfig, for a side-by-side run of separate processes on
// one redis-server.
func BenchmarkShouldRateLimit(b *testing.B) {
	redisAddr := os.Getenv("SLIDE_RLS_BENCH_REDIS")
	if redisAddr == "" {
		redisAddr = redistest.Start(b).Addr
	}
	cfg, err := rls.Parse([]byte(benchConfig), "bench.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendRedis})
	if err != nil {
		b.Fatal(err)
	}
	opts := redislimit.Options(redisAddr)
	opts.PoolSize = 64 // as the anchor's
	rc := goredis.NewClient(opts)
	b.Cleanup(func() { rc.Close() })
	be, err := redislimit.New(rc, redislimit.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ours := start(b, setup{cfg: cfg, redis: be, realClock: true})
	anchorAddr := startIncrServer(b, redisAddr)
	targets := []struct{ name, addr string }{{"ours", ours.addr}, {"anchor", anchorAddr}}
	for t := range strings.SplitSeq(os.Getenv("SLIDE_RLS_BENCH_TARGET"), ",") {
		if name, addr, named := strings.Cut(t, "="); named {
			targets = append(targets, struct{ name, addr string }{name, addr})
		} else if t != "" {
			targets = append(targets, struct{ name, addr string }{"external", t})
		}
	}
	// The requests are built before the run (a hot key's once per key) and
	// shared by the callers, so the generator spends its time on gRPC, the
	// same for every target; each also in gRPC's framing for the frames
	// generator.
	randomReqs := make([]*benchCall, 1000)
	for i := range randomReqs {
		randomReqs[i] = newBenchCall(b, req("bench", 0, desc("random", "k"+strconv.Itoa(i))))
	}
	random := func(r *rand.Rand) *benchCall { return randomReqs[r.IntN(len(randomReqs))] }
	type hotReq struct {
		round, n int64
		c        *benchCall
	}
	var (
		hotN    atomic.Int64
		hotLast atomic.Pointer[hotReq]
	)
	hot := func(*rand.Rand) *benchCall {
		round, n := hotRound.Load(), hotN.Add(1)/1000
		if h := hotLast.Load(); h != nil && h.round == round && h.n == n {
			return h.c
		}
		key := hotRun + "-" + strconv.FormatInt(round, 10) + "-" + strconv.FormatInt(n, 10)
		h := &hotReq{round: round, n: n, c: newBenchCall(b, req("bench", 0, desc("hot", key)))}
		hotLast.Store(h)
		return h.c
	}
	for _, load := range []struct {
		name string
		mk   func(*rand.Rand) *benchCall
	}{{"random", random}, {"hot", hot}} {
		for _, tg := range targets {
			b.Run(tg.name+"_"+load.name, func(b *testing.B) {
				hotRound.Add(1)
				runLoad(b, tg.addr, redisAddr, load.mk)
			})
			b.Run(tg.name+"_"+load.name+"_frames", func(b *testing.B) {
				hotRound.Add(1)
				runFrames(b, tg.addr, redisAddr, load.mk)
			})
		}
	}
}

// benchCall is one request of a load, as a message for grpc-go's client and
// as the framed bytes the frames generator sends.
type benchCall struct {
	msg  *pb.RateLimitRequest
	wire []byte
}

func newBenchCall(b *testing.B, m *pb.RateLimitRequest) *benchCall {
	raw, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return &benchCall{msg: m, wire: grpcFrame(raw)}
}

// runLoad drives b.N calls from benchStreams goroutines through grpc-go's
// client and reports the metrics.
func runLoad(b *testing.B, addr, redisAddr string, mk func(*rand.Rand) *benchCall) {
	clients := make([]pb.RateLimitServiceClient, benchConns)
	for i := range clients {
		// No client retries (as Envoy's filter): gRPC then keeps no replay buffer per call.
		clients[i] = pb.NewRateLimitServiceClient(dial(b, addr, grpc.WithDisableRetry()))
		if _, err := clients[i].ShouldRateLimit(context.Background(), mk(rand.New(rand.NewPCG(1, 2))).msg); err != nil {
			b.Fatalf("warm-up call to %s: %v", addr, err)
		}
	}
	var (
		res  loadResult
		next atomic.Int64
	)
	res.start(b, redisAddr)
	b.SetParallelism(max(1, benchStreams/max(1, runtimeProcs())))
	b.RunParallel(func(pb2 *testing.PB) {
		id := next.Add(1)
		c := clients[int(id)%len(clients)]
		r := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
		lat := make([]time.Duration, 0, 1024)
		over := 0
		for pb2.Next() {
			t := time.Now()
			resp, err := c.ShouldRateLimit(context.Background(), mk(r).msg)
			lat = append(lat, time.Since(t))
			if err != nil {
				b.Error(err)
				break
			}
			if resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT {
				over++
			}
		}
		res.add(lat, over)
	})
	res.report(b, redisAddr)
}

// runFrames drives b.N calls through the frames generator (h2Conn):
// benchConns connections, each with benchStreams/benchConns calls in flight,
// as runLoad's callers share theirs. It reports runLoad's metrics.
func runFrames(b *testing.B, addr, redisAddr string, mk func(*rand.Rand) *benchCall) {
	conns := make([]*h2Conn, benchConns)
	for i := range conns {
		c, err := dialH2(addr)
		if err != nil {
			b.Fatalf("dialling %s: %v", addr, err)
		}
		b.Cleanup(func() { c.Close() })
		var one atomic.Int64
		one.Store(1)
		r := rand.New(rand.NewPCG(1, 2))
		if err := c.run(&one, 1, func() []byte { return mk(r).wire }, func(time.Duration, []byte) {}); err != nil {
			b.Fatalf("warm-up call to %s: %v", addr, err)
		}
		conns[i] = c
	}
	var (
		res  loadResult
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(b.N))
	res.start(b, redisAddr)
	for i, c := range conns {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			lat := make([]time.Duration, 0, b.N/len(conns)+1)
			over := 0
			var bad error
			err := c.run(&left, benchStreams/benchConns, func() []byte { return mk(r).wire }, func(d time.Duration, body []byte) {
				lat = append(lat, d)
				code, err := overallCode(body)
				if err != nil && bad == nil {
					bad = err
				}
				if code == pb.RateLimitResponse_OVER_LIMIT {
					over++
				}
			})
			if err = errors.Join(err, bad); err != nil {
				b.Error(err)
			}
			res.add(lat, over)
		})
	}
	wg.Wait()
	res.report(b, redisAddr)
}

// loadResult gathers a run's latencies and denials from its callers.
type loadResult struct {
	mu        sync.Mutex
	latencies []time.Duration
	over      int
	begin     time.Time
	redis     float64
}

func (r *loadResult) start(b *testing.B, redisAddr string) {
	r.redis = redisMicros(b, redisAddr)
	b.ResetTimer()
	r.begin = time.Now()
}

func (r *loadResult) add(lat []time.Duration, over int) {
	r.mu.Lock()
	r.latencies = append(r.latencies, lat...)
	r.over += over
	r.mu.Unlock()
}

// report states decisions/s, p99_ms, redis_cpu_us/decision and over_limit/decision.
func (r *loadResult) report(b *testing.B, redisAddr string) {
	elapsed := time.Since(r.begin)
	b.StopTimer()
	after := redisMicros(b, redisAddr)
	n := float64(len(r.latencies))
	b.ReportMetric(n/elapsed.Seconds(), "decisions/s")
	slices.Sort(r.latencies)
	if len(r.latencies) > 0 {
		b.ReportMetric(float64(r.latencies[len(r.latencies)*99/100])/1e6, "p99_ms")
	}
	b.ReportMetric((after-r.redis)/n, "redis_cpu_us/decision")
	b.ReportMetric(float64(r.over)/n, "over_limit/decision")
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// redisMicros is the CPU time redis-server has used (INFO cpu: user + sys),
// in µs. Commandstats would count a script's inner commands twice (in their
// own entries and in EVALSHA's), and miss the reading, parsing and writing
// that pipelining saves, so the process's CPU is the fair measure.
func redisMicros(b *testing.B, addr string) float64 {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	total := 0.0
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			x, _ := strconv.ParseFloat(v, 64)
			total += x * 1e6
		}
	}
	return total
}

// incrServer is the anchor: ShouldRateLimit answered for every descriptor by
// one pipelined INCRBY + EXPIRE on domain_key_value_windowstart, the fixed
// window of benchConfig's units (both a minute), as envoyproxy/ratelimit talks
// to Redis. No config lookup, no deny cache, no headers.
type incrServer struct {
	pb.UnimplementedRateLimitServiceServer
	c *goredis.Client
}

func (s *incrServer) ShouldRateLimit(ctx context.Context, r *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	now := time.Now().Unix()
	window := now / 60 * 60
	pipe := s.c.Pipeline()
	incrs := make([]*goredis.IntCmd, len(r.GetDescriptors()))
	for i, d := range r.GetDescriptors() {
		var sb strings.Builder
		sb.WriteString(r.GetDomain())
		for _, e := range d.GetEntries() {
			sb.WriteString("_" + e.GetKey() + "_" + e.GetValue())
		}
		sb.WriteString("_" + strconv.FormatInt(window, 10))
		key := sb.String()
		incrs[i] = pipe.IncrBy(ctx, key, 1)
		pipe.Expire(ctx, key, time.Minute)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK}
	for i, d := range r.GetDescriptors() {
		limit := int64(1_000_000_000)
		if e := d.GetEntries(); len(e) > 0 && e[0].GetKey() == "hot" {
			limit = 100
		}
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK,
			CurrentLimit: &pb.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(limit), Unit: pb.RateLimitResponse_RateLimit_MINUTE}}
		if n := incrs[i].Val(); n > limit {
			st.Code, resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT, pb.RateLimitResponse_OVER_LIMIT
		} else {
			st.LimitRemaining = uint32(limit - n)
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
}

func startIncrServer(b *testing.B, redisAddr string) string {
	c := goredis.NewClient(&goredis.Options{Addr: redisAddr, PoolSize: 64})
	g := grpc.NewServer()
	pb.RegisterRateLimitServiceServer(g, &incrServer{c: c})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go g.Serve(ln)
	b.Cleanup(func() {
		g.Stop()
		c.Close()
	})
	return ln.Addr().String()
}

// BenchmarkShouldRateLimitInProcess calls Server.ShouldRateLimit in process (no gRPC, no
// Redis: benchConfig's limits in memory, the clock fixed) to time what the server itself
// does per request, the response headers included: "random" spreads one descriptor over
// 1,000 keys far under their limit in a random order (one request's numbers are seldom
// its predecessor's, so its headers are built), "hot" sends one key past its limit of 100
// (the same numbers every time: the limit's header cache answers), "two" decides a random
// and a hot descriptor in one request (headers of a list, never cached).
func BenchmarkShouldRateLimitInProcess(b *testing.B) {
	cfg, err := rls.Parse([]byte(benchConfig), "bench.yaml", rls.LoadOptions{DefaultBackend: limiter.BackendMemory})
	if err != nil {
		b.Fatal(err)
	}
	h := start(b, setup{cfg: cfg})
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]*pb.RateLimitRequest, 1<<14)
	two := make([]*pb.RateLimitRequest, len(random))
	for i := range random {
		k := "k" + strconv.Itoa(rnd.IntN(1000))
		random[i] = req("bench", 0, desc("random", k))
		two[i] = req("bench", 0, desc("random", k), desc("hot", "h"))
	}
	hot := []*pb.RateLimitRequest{req("bench", 0, desc("hot", "h"))}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		reqs []*pb.RateLimitRequest
	}{{"random", random}, {"hot", hot}, {"two", two}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				resp, err := h.server.ShouldRateLimit(ctx, c.reqs[i%len(c.reqs)])
				if err != nil || len(resp.GetResponseHeadersToAdd()) == 0 {
					b.Fatalf("ShouldRateLimit: %v, headers %v", err, resp.GetResponseHeadersToAdd())
				}
				i++
			}
		})
	}
}
