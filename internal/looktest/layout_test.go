package looktest

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// hostileServer is a real query.Server over a store holding what keys and values may be:
// a key of 256 bytes (the longest an event may have) with a label of 200, and values up to
// 1e16.
func hostileServer(t *testing.T) string {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	long, err := window.AppendSeries(nil, strings.Repeat("A", 256), []window.Label{{Name: "route", Value: strings.Repeat("/v1/x", 40)}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		for _, ev := range []window.Event{
			{Metric: "latency_ms", Key: string(long), Value: float64(10 + i)},
			{Metric: "latency_ms", Key: "tenant-1", Value: float64(20 + i)},
			{Metric: "size_bytes", Key: "tenant-1", Value: float64(i) * 3e14},
		} {
			ev.TS = now - int64(i)*1000
			if err := st.Observe(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv, err := query.New(query.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestDashboardLayoutHoldsLongKeysAndLargeValues: a 256-byte key must not push the numbers
// of its table out of the panel (every row's count … max must stay on the screen), and a
// chart's axis labels (8.70e+15) must be drawn whole, inside the chart, at a wall screen's
// width and at a laptop's.
func TestDashboardLayoutHoldsLongKeysAndLargeValues(t *testing.T) {
	base := hostileServer(t)
	for _, width := range []int{1024, 1920} {
		b := openPage(t, base+"/", width, 1000)
		b.waitRefreshed(1, 20*time.Second)
		var overflow []string
		b.eval(`(() => {
			const out = [];
			for (const p of document.querySelectorAll(".panel[data-metric]")) {
				const right = p.getBoundingClientRect().right;
				for (const c of p.querySelectorAll("td, th")) {
					const r = c.getBoundingClientRect();
					if (r.right > right + 1) out.push(p.dataset.metric + ": cell " + JSON.stringify(c.textContent.slice(0, 20)) + " ends at " + Math.round(r.right) + ", its panel at " + Math.round(right));
				}
				for (const s of p.querySelectorAll("svg")) {
					const box = s.getBoundingClientRect();
					for (const tx of s.querySelectorAll("text")) {
						const r = tx.getBoundingClientRect();
						if (r.left < box.left - 1 || r.right > box.right + 1) out.push(p.dataset.metric + ": axis label " + JSON.stringify(tx.textContent) + " drawn over [" + Math.round(r.left) + ", " + Math.round(r.right) + "], its chart [" + Math.round(box.left) + ", " + Math.round(box.right) + "]");
					}
				}
			}
			return out;
		})()`, &overflow)
		if len(overflow) > 0 {
			t.Errorf("at %d px wide, %d things are drawn outside their panel or chart, first ones:\n%s", width, len(overflow), strings.Join(overflow[:min(len(overflow), 8)], "\n"))
		}
		var full string
		b.eval(`(() => { const a = [...document.querySelectorAll('td.key a')].find((a) => a.textContent.startsWith("AAAA")); return a ? a.parentElement.title : "none"; })()`, &full)
		if want := strings.Repeat("A", 256) + " {route=" + strings.Repeat("/v1/x", 40) + "}"; full != want {
			t.Errorf("the long key's cell does not hold the whole key in its tooltip: %q", full)
		}
	}
}
