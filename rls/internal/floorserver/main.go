// Command floorserver is the floor of the side-by-side ShouldRateLimit runs
// (README, "Envoy's rate limit service"): a grpc-go server with the rate
// limit service registered as slide's is (the same stream workers) that
// answers every call with one constant OVER_LIMIT status, deciding nothing.
// Measured beside slide and envoyproxy/ratelimit, its decisions/s is the most
// any grpc-go server reaches with that load generator on that machine.
//
//	go run ./rls/internal/floorserver -addr 127.0.0.1:23015
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

type floor struct {
	pb.UnimplementedRateLimitServiceServer
}

var answer = &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OVER_LIMIT,
	Statuses: []*pb.RateLimitResponse_DescriptorStatus{{Code: pb.RateLimitResponse_OVER_LIMIT}}}

func (floor) ShouldRateLimit(context.Context, *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	return answer, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:23015", "gRPC listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floorserver:", err)
		os.Exit(1)
	}
	g := grpc.NewServer(grpc.NumStreamWorkers(uint32(max(64, 16*runtime.GOMAXPROCS(0)))))
	pb.RegisterRateLimitServiceServer(g, floor{})
	if err := g.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "floorserver:", err)
		os.Exit(1)
	}
}
