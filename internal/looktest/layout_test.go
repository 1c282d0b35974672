package looktest

import (
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// hostileServer is a real query.Server over a store holding what keys and values may be:
// a key of 256 bytes (the longest an event may have) with a label of 200, a key that looks
// like another (tenant-1 and tenant-1 with a zero-width space), and values up to 1e16.
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
			{Metric: "latency_ms", Key: "tenant-1\u200b", Value: float64(20 + i)},
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

// TestDashboardShowsInvisibleCharacters: tenant-1 and tenant-1 followed by a zero-width
// space are two keys (ingest takes both); the dashboard must not show them as two rows of
// the same "tenant-1". The invisible character is shown as its code point, in the table and
// on the key's page, while the link still names the key itself.
func TestDashboardShowsInvisibleCharacters(t *testing.T) {
	base := hostileServer(t)
	dom, _ := chromium(t, base+"/", 3*time.Second, "--dump-dom")
	keys := tableKeys(panel(dom, "latency_ms"))
	if !slices.Contains(keys, "tenant-1") || !slices.Contains(keys, "tenant-1⟨U+200B⟩") {
		t.Errorf("latency_ms table keys %q, want tenant-1 and tenant-1⟨U+200B⟩ told apart", keys)
	}
	if !strings.Contains(dom, `href="?view=key&amp;key=tenant-1%E2%80%8B"`) {
		t.Errorf("the zero-width key's link does not name it")
	}
	dom, _ = chromium(t, base+"/?view=key&key=tenant-1%E2%80%8B", 3*time.Second, "--dump-dom")
	if !strings.Contains(dom, `<h2 id="keytitle">key tenant-1⟨U+200B⟩</h2>`) || panel(dom, "latency_ms") == "" {
		t.Errorf("the zero-width key's page does not show it apart or lacks its panel:\n%s", dom)
	}
}

// TestDashboardKeyPageAmongManyKeys: the page of tenant-1 lists its series. With 1,200 other
// keys starting with tenant-1 (tenant-10000 …) in a metric sorted before latency_ms, a
// listing by prefix alone fills its page of 1,000 with theirs, and tenant-1's own
// latency_ms series went missing from its page without a word.
func TestDashboardKeyPageAmongManyKeys(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	evs := []window.Event{{Metric: "cost", Key: "tenant-1", Value: 1}, {Metric: "latency_ms", Key: "tenant-1", Value: 20}}
	for i := range 1200 {
		evs = append(evs, window.Event{Metric: "cost", Key: "tenant-1" + strconv.Itoa(10000+i), Value: 1})
	}
	for _, ev := range evs {
		ev.TS = now
		if err := st.Observe(ev); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := query.New(query.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	dom, _ := chromium(t, hs.URL+"/?view=key&key=tenant-1", 3*time.Second, "--dump-dom")
	if panel(dom, "cost") == "" || panel(dom, "latency_ms") == "" {
		t.Errorf("tenant-1's page lacks its cost or latency_ms panel (has cost: %v, latency_ms: %v)", panel(dom, "cost") != "", panel(dom, "latency_ms") != "")
	}
}
