package looktest

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
)

// TestDashboardPeerDown: two `slide serve` in one consumer group over a 4-partition topic;
// one hangs (SIGSTOP). The other's dashboard and key page still show what it holds, flagged
// partial with the partitions left out, instead of a blank page whose only text is the 503
// of /v1/metrics.
func TestDashboardPeerDown(t *testing.T) {
	need(t, "chromium", "chromium")
	_, brokers := proctest.Broker(t, slideBin, 4)
	start := func(name string) (*proctest.Proc, string) {
		addr, err := proctest.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		// A long session: the hung instance keeps its partitions for the whole test.
		p := proctest.Start(t, name, slideBin, "serve", "--brokers", brokers, "--addr", addr,
			"--session-timeout", "60s", "--peer-timeout", "500ms")
		base := "http://" + addr
		if err := proctest.WaitStatus(context.Background(), base+"/readyz", 200, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		return p, base
	}
	_, base := start("slide-a")
	b, baseB := start("slide-b")
	for _, u := range []string{base, baseB} {
		eventually(t, 30*time.Second, func() string { return u + " does not own 2 of the 4 partitions" }, func() bool {
			var st struct {
				Ready  bool
				Ingest struct{ Partitions map[string]int }
			}
			return proctest.GetJSON(u+"/v1/status", &st) == nil && st.Ready && st.Ingest.Partitions["live"] == 2
		})
	}
	now := time.Now().UnixMilli()
	var lines []string
	for i := range 60 {
		lines = append(lines, fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":%d}`, now-int64(i)*1000, 10+i))
	}
	post(t, base, lines)
	if err := syscall.Kill(b.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(b.PID(), syscall.SIGCONT) })
	eventually(t, 10*time.Second, func() string { return "/v1/metrics does not miss slide-b's partitions" }, func() bool {
		code, _, err := proctest.Get(base + "/v1/metrics")
		return err == nil && code == 503
	})

	dom, _ := chromium(t, base+"/", 5*time.Second, "--dump-dom")
	lat := panel(dom, "latency_ms")
	if got := tableKeys(lat); len(got) != 1 || got[0] != "tenant-1" {
		t.Errorf("with slide-b hung, the latency_ms table has keys %v, want [tenant-1]:\n%s", got, dom)
	}
	for _, want := range []string{"partial: partitions ", "partial history: partitions ", "partial table: partitions ", "have no reachable owner"} {
		if !strings.Contains(dom, want) {
			t.Errorf("with slide-b hung, the dashboard lacks %q", want)
		}
	}
	if n := drawn(lat)["p95"]; n < 5 {
		t.Errorf("with slide-b hung, latency_ms p95 line has %d points, want ≥ 5", n)
	}

	dom, _ = chromium(t, base+"/?view=key&key=tenant-1", 5*time.Second, "--dump-dom")
	lat = panel(dom, "latency_ms")
	if lat == "" || drawn(lat)["p95"] < 5 || !strings.Contains(dom, "partial: partitions ") {
		t.Errorf("with slide-b hung, tenant-1's page lacks its latency_ms history or the partial note:\n%s", dom)
	}
}
