package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/rls"
)

// rlsFlags are serve's flags for Envoy's rate limit service, and what serve
// builds from them: the loaded config, then the limiter service it shares with
// POST /v1/allow.
type rlsFlags struct {
	grpcAddr    string
	config      string
	respHeaders bool   // --rls-response-headers
	headerNames string // --rls-response-header-names

	limitHdr *rls.LimitHeaderNames // set by policies when respHeaders

	cfg   *rls.Config      // set by policies
	svc   *limiter.Service // set by serve's limiter
	redis limiter.Backend  // set by serve's limiter with --redis
	live  *rlsLive         // shared by the copies of the flags: what SIGHUP reloads
}

// rlsLive is the running rate limit service, for SIGHUP to reload: nil until it listens.
type rlsLive struct {
	srv atomic.Pointer[rls.Server]
	opt rls.LoadOptions // as at start; set before srv
}

func (f *rlsFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&f.grpcAddr, "grpc-addr", "", "gRPC listen address of Envoy's rate limit service (ShouldRateLimit, health, reflection); empty: off")
	fs.StringVar(&f.config, "rls-config", "", "envoyproxy/ratelimit YAML config FILE or DIR of *.yaml for the gRPC rate limit service (needs --grpc-addr); reloaded when it changes and on SIGHUP (a bad reload keeps the old config; a new descriptor or a new unit/algorithm needs a restart)")
	fs.BoolVar(&f.respHeaders, "rls-response-headers", false, "add envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED headers to every answer with a limited descriptor: the limit, remaining and seconds to reset of the descriptor nearest its limit (the one over it, when one is), named by --rls-response-header-names")
	fs.StringVar(&f.headerNames, "rls-response-header-names", defaultHeaderNames, "the names of --rls-response-headers' limit, remaining and reset headers, comma-separated (envoyproxy/ratelimit's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER)")
	f.live = new(rlsLive)
}

// reloadOnHUP reloads --rls-config into the rate limit service at every SIGHUP and when
// the file, or a *.yaml of the directory, changes (checked every configPoll, following
// symlinks: a Kubernetes ConfigMap is updated by swapping its ..data link, and in the
// distroless image nobody can send a SIGHUP), until ctx ends. Registered before serve
// builds anything (onHUP), so an early SIGHUP never kills it. A config that does not load
// or needs a restart keeps the one in use, logged with the loader's file:line and counted
// in slide_rls_config_reloads_total{result="refused"}.
func (f *rlsFlags) reloadOnHUP(ctx context.Context, log *slog.Logger) {
	up := func() bool { return f.live.srv.Load() != nil }
	watchConfig(ctx, f.config, "--rls-config changed", up, func(why string) {
		srv := f.live.srv.Load()
		if srv == nil {
			log.Warn(why+": the rate limit service is not up yet; not reloaded", "rls_config", f.config)
			return
		}
		c, err := srv.ReloadFile(f.config, f.live.opt)
		if errors.Is(err, rls.ErrNeedsRestart) {
			log.Error(why+": not reloaded: serving the previous config; restart slide serve to apply this one", "rls_config", f.config, "err", err)
			return
		}
		if err != nil {
			log.Error(why+": reloading --rls-config failed; serving the previous config", "rls_config", f.config, "err", err)
			return
		}
		log.Info(why+": --rls-config reloaded: "+c.String(), "rls_config", f.config)
	})
}

var defaultHeaderNames = rls.DefaultLimitHeaderNames.Limit + "," + rls.DefaultLimitHeaderNames.Remaining + "," + rls.DefaultLimitHeaderNames.Reset

// limitHeaders parses --rls-response-headers and --rls-response-header-names.
func (f *rlsFlags) limitHeaders() (*rls.LimitHeaderNames, error) {
	if !f.respHeaders {
		if f.headerNames != defaultHeaderNames {
			return nil, errors.New("--rls-response-header-names needs --rls-response-headers: no such header is sent without it")
		}
		return nil, nil
	}
	parts := strings.Split(f.headerNames, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("--rls-response-header-names %q: want three names, LIMIT,REMAINING,RESET", f.headerNames)
	}
	n := rls.LimitHeaderNames{Limit: strings.TrimSpace(parts[0]), Remaining: strings.TrimSpace(parts[1]), Reset: strings.TrimSpace(parts[2])}
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("--rls-response-header-names: %w", err)
	}
	return &n, nil
}

// policies loads --rls-config: the policies and usage rules its descriptors map
// to, counted in Redis when --redis is set and in memory otherwise.
func (f *rlsFlags) policies(redis string) ([]limiter.Policy, []usage.Rule, error) {
	var err error
	if f.limitHdr, err = f.limitHeaders(); err != nil {
		return nil, nil, err
	}
	switch {
	case f.respHeaders && f.config == "":
		return nil, nil, errors.New("--rls-response-headers needs --rls-config and --grpc-addr: only the rate limit service sends them")
	case f.config == "" && f.grpcAddr == "":
		return nil, nil, nil
	case f.config == "":
		return nil, nil, errors.New("--grpc-addr needs --rls-config: the rate limit service has no descriptors to match")
	case f.grpcAddr == "":
		return nil, nil, errors.New("--rls-config needs --grpc-addr: nothing would serve it")
	}
	opt := rls.LoadOptions{DefaultBackend: limiter.BackendMemory}
	if redis != "" {
		opt.DefaultBackend = limiter.BackendRedis
	}
	cfg, err := rls.Load(f.config, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("--rls-config: %w", err)
	}
	if cfg.Limits() == 0 {
		return nil, nil, fmt.Errorf("--rls-config %s: no descriptor has a rate limit or rules", f.config)
	}
	f.cfg, f.live.opt = cfg, opt
	return cfg.Policies(), cfg.Rules(), nil
}

// rlsServer is the gRPC server of --grpc-addr, listening but not yet serving.
type rlsServer struct {
	g  *rls.GRPC
	ln net.Listener
}

// listen builds the rate limit service on the limiter service and opens its
// listener; nil when --grpc-addr is not set.
func (f *rlsFlags) listen(token string, reg prometheus.Registerer, log *slog.Logger) (*rlsServer, error) {
	if f.grpcAddr == "" {
		return nil, nil
	}
	srv, err := rls.NewServer(rls.ServerConfig{Config: f.cfg, Service: f.svc, Redis: f.redis, AuthToken: token, Registerer: reg, Logger: log,
		LimitHeaders: f.limitHdr})
	if err != nil {
		return nil, fmt.Errorf("rate limit service: %w", err)
	}
	ln, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return nil, fmt.Errorf("--grpc-addr: listening on %s: %w", f.grpcAddr, err)
	}
	f.live.srv.Store(srv)
	log.Info("rate limit service (gRPC)", "addr", ln.Addr().String(), "domains", f.cfg.Domains(), "policies", len(f.cfg.Policies()))
	return &rlsServer{g: rls.NewGRPC(srv), ln: ln}, nil
}

// run serves until work ends, then stops gracefully within grace; a failure to
// serve goes to errc. Nil-safe.
func (r *rlsServer) run(work context.Context, wg *sync.WaitGroup, errc chan<- error, grace time.Duration) {
	if r == nil {
		return
	}
	wg.Go(func() {
		if err := r.g.Serve(r.ln); err != nil {
			errc <- err
		}
	})
	wg.Go(func() {
		<-work.Done()
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		r.g.Shutdown(ctx)
	})
}
