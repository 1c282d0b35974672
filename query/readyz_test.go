package query_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/slide-metrics/slide/query"
)

// With Config.Backends, /readyz carries each backend's state, ready or not.
func TestReadyzBackends(t *testing.T) {
	var ready atomic.Bool
	e := newEnv(t, func(c *query.Config) {
		c.Ready = func() error {
			if ready.Load() {
				return nil
			}
			return errors.New("kafka k:9093: SASL Authentication Failed")
		}
		c.Backends = func() []query.BackendState {
			return []query.BackendState{{Name: "redis", Addr: "r:6379", State: "failing", Error: "redis r:6379: WRONGPASS"}, {Name: "kafka", Addr: "k:9093", State: "ok"}}
		}
	})
	const backends = `"backends":[{"name":"redis","addr":"r:6379","state":"failing","error":"redis r:6379: WRONGPASS"},{"name":"kafka","addr":"k:9093","state":"ok"}]`
	code, body, hdr := e.do("GET", "/readyz", nil)
	want := `{"error":{"code":"not_ready","message":"not ready: kafka k:9093: SASL Authentication Failed"},` + backends + "}\n"
	if code != 503 || string(body) != want || hdr.Get("Retry-After") != "1" {
		t.Errorf("not ready: %d %s (Retry-After %q), want 503 %s", code, body, hdr.Get("Retry-After"), want)
	}
	ready.Store(true)
	code, body, _ = e.do("GET", "/readyz", nil)
	if want := `{"status":"ready",` + backends + "}\n"; code != 200 || string(body) != want {
		t.Errorf("ready: %d %s, want 200 %s", code, body, want)
	}
}
