package rls

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// ServiceName is the gRPC service the Server implements; health checks answer
// for it and for "" (the whole server).
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// MaxRecvMsgBytes bounds one request message: far above any real request
// (DefaultMaxDescriptors × DefaultMaxEntries small entries), so a huge one is
// refused by gRPC (ResourceExhausted) before it is decoded.
const MaxRecvMsgBytes = 1 << 20

// GRPC is a gRPC server carrying a Server, the standard health service
// (grpc.health.v1) and server reflection.
type GRPC struct {
	srv    *grpc.Server
	health *health.Server
}

// NewGRPC registers s, health checking and reflection on a new grpc.Server
// built with opts (after slide's own: MaxRecvMsgBytes, keepalive pings from
// clients allowed every 10 s, which Envoy's defaults stay within, and
// streamWorkers stream workers: calls run on long-lived goroutines whose
// stacks have grown to fit, instead of a new goroutine per call growing its
// stack each time).
func NewGRPC(s *Server, opts ...grpc.ServerOption) *GRPC {
	base := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.recoverPanic),
		grpc.MaxRecvMsgSize(MaxRecvMsgBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.NumStreamWorkers(streamWorkers()),
	}
	g := &GRPC{srv: grpc.NewServer(append(base, opts...)...), health: health.NewServer()}
	pb.RegisterRateLimitServiceServer(g.srv, s)
	healthpb.RegisterHealthServer(g.srv, g.health)
	reflection.Register(g.srv)
	g.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	return g
}

// streamWorkers is the number of goroutines that run calls: gRPC hands a call
// to an idle one or, when all are busy, starts a goroutine for it (whose stack
// then grows for every call, a few µs each), and a call waiting on Redis keeps
// its worker busy. One per CPU left most calls of 16 concurrent streams to new
// goroutines; 16 per CPU (at least 64) covers Envoy's usual concurrency, and
// an idle worker costs only its stack.
func streamWorkers() uint32 { return uint32(max(64, 16*runtime.GOMAXPROCS(0))) }

// recoverPanic turns a panic in a handler into an Internal error (counted and
// logged) instead of the end of the process: gRPC, unlike net/http, does not
// recover. A panic is a bug; no input is meant to cause one (FuzzShouldRateLimit).
func (s *Server) recoverPanic(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.errs.WithLabelValues("internal").Inc()
			s.log.Error("panic in gRPC handler", "method", info.FullMethod, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "internal error in %s", info.FullMethod)
		}
	}()
	return h(ctx, req)
}

// Server returns the underlying grpc.Server.
func (g *GRPC) Server() *grpc.Server { return g.srv }

// Serve accepts connections on ln until Shutdown; it returns nil after
// Shutdown and the listener's error otherwise.
func (g *GRPC) Serve(ln net.Listener) error {
	err := g.srv.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("serving gRPC: %w", err)
	}
	return nil
}

// Shutdown marks the server NOT_SERVING (so health-checking clients move
// away), then stops accepting and waits for in-flight calls until ctx ends,
// when it closes the remaining connections.
func (g *GRPC) Shutdown(ctx context.Context) {
	g.health.Shutdown()
	done := make(chan struct{})
	go func() {
		g.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		g.srv.Stop()
		<-done
	}
}
