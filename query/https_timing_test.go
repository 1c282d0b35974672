package query_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"testing"

	"github.com/slide-metrics/slide/internal/tlstest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/query"
)

// BenchmarkHTTPSAllow: POST /v1/allow (one memory policy) over HTTPS on reused connections
// (ours: TLS 1.3 with an ECDSA P-256 certificate through tls.NewListener and
// GetCertificate, as `slide serve --tls-cert` serves) against the same handler over plain
// HTTP (anchor). Goal: ours ≥ 0.8× the anchor's req/s.
func BenchmarkHTTPSAllow(b *testing.B) {
	e := newEnv(b, func(c *query.Config) {
		svc, err := limiter.NewService(limiter.Config{
			Policies: []limiter.Policy{{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 1 << 40, RefillPerSecond: 1e6}},
			Clock:    c.Now,
		})
		if err != nil {
			b.Fatal(err)
		}
		c.Allow = limithttp.AllowHandler(svc)
	})
	ca := tlstest.NewCA(b, "bench")
	pair := ca.Server("bench")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	// Its error log is off: a handshake cut short when the load ends would print into the
	// benchmark lines benchreport parses.
	srv := &http.Server{Handler: e.srv.Handler(), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(tls.NewListener(ln, &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair.Cert, nil },
	}))
	b.Cleanup(func() { srv.Close() })
	body := []byte(`{"policy":"api","key":"tenant-42"}`)
	post := func(u string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest("POST", u, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			return req
		}
	}
	b.Run("ours", func(b *testing.B) {
		runLoadTLS(b, &tls.Config{RootCAs: ca.Pool}, 200, post("https://"+ln.Addr().String()+"/v1/allow"))
	})
	b.Run("anchor", func(b *testing.B) { runLoad(b, e.http, 200, post(e.http.URL+"/v1/allow")) })
}
