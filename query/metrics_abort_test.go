package query_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/query"
)

// lockedBuffer is a log sink the handler goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAbortedScrapeLogsOneLine: a scraper that closes the connection mid-scrape (a scrape
// timeout, a restarted Prometheus) is not slide's fault: it is logged once, at debug, not
// as a warning for every metric family left unsent (it was 100 warnings a scrape here, and
// 45 for each aborted scrape of slide serve --demo --demo-keys 3000 with exports).
func TestAbortedScrapeLogsOneLine(t *testing.T) {
	var logs lockedBuffer
	e := newEnv(t, func(c *query.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	// 100 families of 1,000 series, about 8 MB of text: far more than the sockets buffer.
	for f := range 100 {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: fmt.Sprintf("big_%d", f), Help: "h"}, []string{"id"})
		for i := range 1000 {
			g.WithLabelValues(fmt.Sprintf("%060d", i)).Set(float64(i))
		}
		e.reg.MustRegister(g)
	}
	done := make(chan struct{}, 3)
	h := e.srv.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- struct{}{}
	}))
	defer srv.Close()
	for range 3 {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n")
		if _, err := conn.Read(make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		_ = conn.(*net.TCPConn).SetLinger(0) // close with a reset, as a killed scraper does
		conn.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the handler did not end after the scraper closed the connection")
		}
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "metrics") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=DEBUG") {
		t.Errorf("three aborted scrapes logged %d lines, want one at debug; the first three:\n%s", len(lines), strings.Join(lines[:min(3, len(lines))], "\n"))
	}
}
