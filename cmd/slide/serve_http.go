package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/readgate"
	"github.com/slide-metrics/slide/window"
)

// checkHTTP refuses HTTP flags that cannot work, before anything starts.
func (c *serveConfig) checkHTTP() error {
	switch {
	case c.authReads && c.authTokenFile == "":
		return errors.New("--auth-reads needs --auth-token-file: there is no token to require on reads")
	case c.readHeaderTimeout <= 0:
		return fmt.Errorf("--read-header-timeout %s: must be positive", c.readHeaderTimeout)
	case c.maxConnsPerClient < 0:
		return fmt.Errorf("--max-conns-per-client %d: must be 0 (unlimited) or more", c.maxConnsPerClient)
	}
	return nil
}

// listen opens the HTTP listener with the per-client connection cap, whose metrics
// (slide_http_conns_open, slide_http_conns_refused_total) go to reg.
func (c *serveConfig) listen(reg prometheus.Registerer) (*query.ClientLimitListener, error) {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, bindError("addr", c.addr, fmt.Errorf("listening on %s: %w", c.addr, err))
	}
	l := query.LimitPerClient(ln, c.maxConnsPerClient)
	if err := reg.Register(l); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("registering listener metrics: %w", err)
	}
	return l, nil
}

// answerTimeout is the http.Server's WriteTimeout: past it, nothing more of an answer reaches
// its client.
const answerTimeout = 30 * time.Second

// promQLTimeout bounds a PromQL evaluation (promapi.Config.Timeout) to end 5 s before its
// answer's write deadline, so a query too slow for it is answered with errorType "timeout"
// and stops. At the engine's default (Prometheus' 2 min) a query of 30 s to 2 min ran to its
// end, a core busy all along, and its client got the connection closed with no answer.
const promQLTimeout = answerTimeout - 5*time.Second

// promConfig is the PromQL API's configuration: the engine's bounds are promapi's defaults
// but for its timeout, which must end before the answer's write deadline.
func (c *serveConfig) promConfig(store *window.Store, ready func() error, cl *cluster.Cluster, log *slog.Logger) promapi.Config {
	return promapi.Config{Store: store, Ready: ready, Cluster: cl, Logger: log, DisablePushdown: !c.promPushdown, Timeout: promQLTimeout}
}

// readGate is the one cap on the reads that scan series, shared by the /v1 reads and the
// PromQL API (--read-max-concurrency; the deprecated --promql-max-concurrency when given
// alone), its metrics (slide_http_reads_*) registered with reg.
func (c *serveConfig) readGate(reg prometheus.Registerer, log *slog.Logger) (*readgate.Gate, error) {
	n, setting := c.readMax, "--read-max-concurrency"
	if c.promConcurrent > 0 {
		log.Warn("--promql-max-concurrency is deprecated: --read-max-concurrency caps PromQL queries and the /v1 reads together")
		if n == 0 {
			n, setting = c.promConcurrent, "--read-max-concurrency (given as the deprecated --promql-max-concurrency)"
		}
	}
	if n == 0 {
		n = 2 * runtime.GOMAXPROCS(0)
	}
	return readgate.New(readgate.Config{Max: n, Setting: setting, Registerer: reg})
}

// newHTTPServer sets timeouts on every server: a slow client cannot hold a connection
// forever. readHeaderTimeout bounds the wait for a request header, counted from the accept
// (from the first byte for a keep-alive connection's later requests), so a slowloris
// trickling one byte at a time is cut off then; the body and the answer get 30 s each, an
// idle keep-alive connection 120 s.
func newHTTPServer(h http.Handler, readHeaderTimeout time.Duration, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           nosniff{h},
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      answerTimeout,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// drain is what serve does between SIGTERM and closing its listener, for --shutdown-delay:
// it goes on answering, /readyz answers 503 (shutting down) so that load balancers and
// Kubernetes' endpoints take the instance out, and every answer says Connection: close, so
// a client holding kept-alive connections (which a Service keeps routing to a terminating
// pod) opens its next one elsewhere. Without a delay the listener and the idle connections
// close at SIGTERM: a request a client sent on one of them at that moment is lost (EOF),
// and clients do not retry a POST. The zero value has no delay. Safe for concurrent use.
type drain struct {
	delay time.Duration
	on    atomic.Bool
}

// handler makes h's answers close their connection once the drain began, and /readyz
// answer 503: only /readyz, as the reads go on answering until the listener closes.
func (d *drain) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.on.Load() {
			w.Header().Set("Connection", "close") // net/http closes the connection after this answer
			if r.URL.Path == "/readyz" {
				httperr.Write(w, httperr.NotReady, "", "not ready: shutting down")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// wait begins the drain and returns after the delay, or with the first error of background
// work, which ends it early.
func (d *drain) wait(background <-chan error, log *slog.Logger) error {
	if d.delay <= 0 {
		return nil
	}
	d.on.Store(true)
	log.Info("shutting down: /readyz answers 503 and connections close after their next answer; still serving until the delay ends", "delay", d.delay)
	t := time.NewTimer(d.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case err := <-background:
		log.Error("stopping", "err", err)
		return err
	}
}

// serveUntilDone serves on ln until ctx ends (SIGTERM) or background work fails, then shuts
// down gracefully: after d's delay (SIGTERM only) the listener closes and in-flight requests
// get up to grace.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, d *drain, grace time.Duration, background <-chan error, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var failed error
	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP: %w", err)
	case failed = <-background:
		log.Error("stopping", "err", failed)
	case <-ctx.Done():
		failed = d.wait(background, log)
	}
	log.Info("shutting down", "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			_ = srv.Close() // the connections still open are cut, not left to run on
			err = fmt.Errorf("requests still running after --shutdown-timeout %v were cut", grace)
		}
		return errors.Join(failed, fmt.Errorf("shutting down HTTP: %w", err))
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(failed, fmt.Errorf("serving HTTP: %w", err))
	}
	log.Info("HTTP stopped; stopping ingest")
	return failed
}

// nosniff says X-Content-Type-Options: nosniff on every answer, as the dashboard's page did
// alone: a browser pointed at a JSON answer (which carries keys and label values as sent)
// or at a text error never guesses it is a page and runs what is in it.
type nosniff struct{ h http.Handler }

var nosniffValue = []string{"nosniff"}

func (n nosniff) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["X-Content-Type-Options"] = nosniffValue // assigned, not Set: no allocation
	n.h.ServeHTTP(w, r)
}
