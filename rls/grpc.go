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
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
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
		grpc.ForceServerCodecV2(requestCodec{encoding.GetCodecV2(protoenc.Name)}),
		grpc.ChainUnaryInterceptor(s.recoverPanic),
		grpc.MaxRecvMsgSize(MaxRecvMsgBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.NumStreamWorkers(streamWorkers()),
	}
	g := &GRPC{srv: grpc.NewServer(append(base, opts...)...), health: health.NewServer()}
	g.srv.RegisterService(&serviceDesc, s)
	healthpb.RegisterHealthServer(g.srv, g.health)
	reflection.Register(g.srv)
	g.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	return g
}

// serviceDesc is the generated pb.RateLimitService_ServiceDesc with its handler
// replaced by shouldRateLimitHandler.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*pb.RateLimitServiceServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimitHandler}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    pb.RateLimitService_ServiceDesc.Metadata,
}

// request is what shouldRateLimitHandler asks requestCodec to decode: the
// request, and why it could not be decoded.
type request struct {
	req *pb.RateLimitRequest
	err error
}

// requestCodec is gRPC's protobuf codec, except that a ShouldRateLimit request
// whose strings are not all UTF-8 is decoded with them as they are
// (decodeLenient), and one that does not decode (not protobuf, truncated)
// reaches the handler as request.err instead of failing inside gRPC, which
// answers Internal for any codec error: a malformed request is the client's
// fault, InvalidArgument. Everything else (health, reflection, answers) goes
// to the protobuf codec as it is.
type requestCodec struct{ encoding.CodecV2 }

func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*request)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	if r.err = c.CodecV2.Unmarshal(data, r.req); r.err != nil {
		// Strings that are not UTF-8 come from Envoy's headers: decoded as they are (decode.go).
		if lenient, err := decodeLenient(data.Materialize()); err == nil {
			r.req, r.err = lenient, nil
		}
	}
	return nil
}

// shouldRateLimitHandler is the generated handler of ShouldRateLimit, decoding
// through requestCodec: a request that does not decode is refused with
// InvalidArgument naming the decoder's problem (after the token check, so a
// client without the token learns nothing), counted as invalid_request.
func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*Server)
	r := request{req: new(pb.RateLimitRequest)}
	if err := dec(&r); err != nil {
		return nil, err
	}
	if r.err != nil {
		if s.token != nil {
			if err := s.authorize(ctx); err != nil {
				s.errs.WithLabelValues("unauthenticated").Inc()
				return nil, err
			}
		}
		err := status.Errorf(codes.InvalidArgument, "malformed rate limit request: %v", r.err)
		s.errs.WithLabelValues("invalid_request").Inc()
		s.logRefusal("invalid rate limit request", err)
		return nil, err
	}
	if interceptor == nil {
		return s.ShouldRateLimit(ctx, r.req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: pb.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, r.req, info, func(ctx context.Context, req any) (any, error) {
		return s.ShouldRateLimit(ctx, req.(*pb.RateLimitRequest))
	})
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
