package rls_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/rls"
	"github.com/slide-metrics/slide/window"
)

// t0 is 2026-12-01T10:00:00.25Z: a quarter second into an hour, so every
// fixed window of a second or more has started at the hour.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 250_000_000, time.UTC)

// harness is a Server behind a real gRPC listener on loopback, with a real
// gRPC client.
type harness struct {
	client pb.RateLimitServiceClient
	server *rls.Server
	svc    *limiter.Service
	conn   *grpc.ClientConn
	addr   string
	reg    *prometheus.Registry
	store  *window.Store
	now    atomic.Int64 // ns; the limiter's clock unless realClock
}

type setup struct {
	cfg       *rls.Config
	redis     limiter.Backend
	token     string
	realClock bool
	limitHdr  *rls.LimitHeaderNames
}

func loadTestConfig(t testing.TB, opt rls.LoadOptions) *rls.Config {
	t.Helper()
	cfg, err := rls.Load("testdata/config", opt)
	if err != nil {
		t.Fatalf("loading testdata/config: %v", err)
	}
	return cfg
}

func start(t testing.TB, s setup) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry()}
	h.now.Store(t0.UnixNano())
	var err error
	h.store, err = window.NewStore(window.StoreConfig{
		Ring:    window.RingConfig{Slot: 10 * time.Second, Slots: 30},
		Metrics: map[string]window.RingConfig{"cost": {Slot: 10 * time.Second, Slots: 30}},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkers, err := usage.NewCheckers(h.store, s.cfg.Rules())
	if err != nil {
		t.Fatal(err)
	}
	lc := limiter.Config{Policies: s.cfg.Policies(), Checkers: checkers, Redis: s.redis, Registerer: h.reg}
	if !s.realClock {
		lc.Clock = func() time.Time { return time.Unix(0, h.now.Load()) }
	}
	svc, err := limiter.NewService(lc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rls.NewServer(rls.ServerConfig{Config: s.cfg, Service: svc, Redis: s.redis, AuthToken: s.token, Registerer: h.reg, LimitHeaders: s.limitHdr})
	if err != nil {
		t.Fatal(err)
	}
	h.server, h.svc = srv, svc
	g := rls.NewGRPC(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	h.conn = dial(t, h.addr)
	h.client = pb.NewRateLimitServiceClient(h.conn)
	return h
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (h *harness) advance(d time.Duration) { h.now.Add(int64(d)) }

// req builds a request of one or more descriptors, each a list of key, value pairs.
func req(domain string, hits uint32, descs ...[]string) *pb.RateLimitRequest {
	r := &pb.RateLimitRequest{Domain: domain, HitsAddend: hits}
	for _, kv := range descs {
		d := &rlv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		r.Descriptors = append(r.Descriptors, d)
	}
	return r
}

func desc(kv ...string) []string { return kv }

func (h *harness) call(t testing.TB, r *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := h.client.ShouldRateLimit(context.Background(), r)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", r, err)
	}
	if len(resp.GetStatuses()) != len(r.GetDescriptors()) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(r.GetDescriptors()))
	}
	return resp
}

// header returns a response header to add, "" when absent.
func header(resp *pb.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == name {
			return h.GetValue()
		}
	}
	return ""
}

// rawMsg is a message already in wire format, for requests a Go client would
// refuse to encode.
type rawMsg []byte

// rawCodec sends and receives rawMsg bytes as they are, under the "proto"
// name so the server decodes them with its protobuf codec.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*rawMsg), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*rawMsg) = append(rawMsg(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func rawCodecOption() grpc.CallOption { return grpc.ForceCodec(rawCodec{}) }

// rawRequest encodes a RateLimitRequest of one descriptor with one entry by
// hand (field numbers from rls.proto and ratelimit.proto), without the UTF-8
// check a Go client makes.
func rawRequest(domain, key, value string) []byte {
	var entry, d, r []byte
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, key)
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendString(entry, value)
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, entry)
	r = protowire.AppendTag(r, 1, protowire.BytesType)
	r = protowire.AppendString(r, domain)
	r = protowire.AppendTag(r, 2, protowire.BytesType)
	r = protowire.AppendBytes(r, d)
	return r
}

// counter reads a counter from reg by its labels.
func counter(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// downAddr is a loopback address nothing listens on: every Redis call to it fails at once.
func downAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
