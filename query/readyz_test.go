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

// A ready instance names what it restores meanwhile: the partitions whose windows
// (Config.Restoring) and whose limiter state (Config.RestoringLimits) it has not restored,
// in /readyz's 200 and in /v1/status; neither list when there is nothing to name.
func TestReadyzNamesWhatItRestores(t *testing.T) {
	var windows, limits atomic.Pointer[[]int32]
	windows.Store(&[]int32{4})
	limits.Store(&[]int32{4, 5})
	e := newEnv(t, func(c *query.Config) {
		c.Restoring = func() []int32 { return *windows.Load() }
		c.RestoringLimits = func() []int32 { return *limits.Load() }
	})
	code, body, _ := e.do("GET", "/readyz", nil)
	if want := `{"status":"ready","restoring_partitions":[4],"restoring_limits":[4,5]}` + "\n"; code != 200 || string(body) != want {
		t.Errorf("restoring: %d %s, want 200 %s", code, body, want)
	}
	var st struct {
		Ready  bool    `json:"ready"`
		Limits []int32 `json:"restoring_limits"`
	}
	e.getJSON("/v1/status", 200, &st)
	if !st.Ready || len(st.Limits) != 2 || st.Limits[1] != 5 {
		t.Errorf("status: %+v", st)
	}
	windows.Store(&[]int32{})
	limits.Store(&[]int32{})
	code, body, _ = e.do("GET", "/readyz", nil)
	if want := `{"status":"ready"}` + "\n"; code != 200 || string(body) != want {
		t.Errorf("restored: %d %s, want 200 %s", code, body, want)
	}
}
