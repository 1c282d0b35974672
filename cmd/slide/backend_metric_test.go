package main

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A backend's state is on /metrics, not only on /readyz: with the broker gone,
// slide_ingest_lag_seconds stays 0 (no record waits that the consumer can see) and every
// alert of the operating guide's table stayed silent while the windows stopped filling
// (found by stopping `slide broker` under a scraping Prometheus). slide_backend_up is 1
// while a backend's last check passed and 0 while it fails, absent before the first check.
func TestBackendUpMetric(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k := &backend{name: "kafka", addr: "k:9093", gates: true}
	r := &backend{name: "redis", addr: "r:6379"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(backends{k, r})
	compare := func(series string) {
		t.Helper()
		want := "# HELP slide_backend_up " + backendUpHelp + "\n# TYPE slide_backend_up gauge\n" + series
		if series == "" {
			want = ""
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slide_backend_up"); err != nil {
			t.Error(err)
		}
	}
	compare("")
	k.set(nil, log)
	compare(`slide_backend_up{backend="kafka"} 1` + "\n")
	k.set(errors.New("dial tcp: connection refused"), log)
	r.set(nil, log)
	compare(`slide_backend_up{backend="kafka"} 0` + "\n" + `slide_backend_up{backend="redis"} 1` + "\n")
}

// The real serve exports it: brokers that refuse connections show as kafka 0.
func TestServeExportsBackendUp(t *testing.T) {
	s := startServe(t, "--brokers", freeAddr(t))
	base := "http://" + s.addr
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, body := get(t, http.DefaultClient, base+"/metrics")
		if strings.Contains(body, "\n"+`slide_backend_up{backend="kafka"} 0`+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed kafka down:\n%s", grepMetric(body, "slide_backend"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func grepMetric(text, prefix string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, prefix) || strings.HasPrefix(l, "# HELP "+prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
