package looktest

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// goneAfter serves the real API until the dashboard's refresh number down starts, then drops every connection unanswered, as a server that died
// or restarts does, until refresh number up (0: never) starts.
func goneAfter(t *testing.T, down, up int64) string {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range 30 {
		if err := st.Observe(window.Event{TS: now - int64(i)*1000, Metric: "latency_ms", Key: "tenant-1", Value: float64(10 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := query.New(query.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	// A refresh starts with /v1/status and /v1/metrics at once, in either order.
	var statuses, lists atomic.Int64
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			statuses.Add(1)
		case "/v1/metrics":
			lists.Add(1)
		}
		n := max(statuses.Load(), lists.Load())
		if n >= down && (up == 0 || n < up) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestDashboardServerGone: the dashboard's server goes away after its first refresh (it
// died, or restarts). The page must not go on saying "ready" in green with a fresh
// "updated" time over the data of the first refresh: the badge says the server is
// unreachable, the header since when the data is, and the panels are marked stale. When
// the server is back, the next refresh clears all of it.
func TestDashboardServerGone(t *testing.T) {
	base := goneAfter(t, 2, 0)
	dom, _ := chromium(t, base+"/", 8*time.Second, "--dump-dom")
	if !strings.Contains(dom, `data-refreshed="2"`) || panel(dom, "latency_ms") == "" {
		t.Fatalf("the page did not refresh twice over a first good answer:\n%s", dom)
	}
	for _, want := range []string{`id="ready" class="badge bad"[^>]*>unreachable<`, `id="metrics" class="stale"`, `id="updated"[^>]*>refresh failed: showing the data of \d`} {
		if !regexp.MustCompile(want).MatchString(dom) {
			t.Errorf("with its server gone, the page lacks %#q", want)
		}
	}
	if strings.Contains(dom, `class="badge ok"`) || regexp.MustCompile(`id="updated"[^>]*>updated `).MatchString(dom) {
		t.Errorf("with its server gone, the page still says ready or updated:\n%s", dom[strings.Index(dom, "<header>"):strings.Index(dom, "</header>")])
	}

	base = goneAfter(t, 2, 3)
	dom, _ = chromium(t, base+"/", 13*time.Second, "--dump-dom")
	if !strings.Contains(dom, `data-refreshed="3"`) {
		t.Fatalf("the page did not refresh three times:\n%s", dom)
	}
	if !regexp.MustCompile(`class="badge ok"[^>]*>ready<`).MatchString(dom) || strings.Contains(dom, `class="stale"`) || !regexp.MustCompile(`id="updated"[^>]*>updated `).MatchString(dom) {
		t.Errorf("with its server back, the page still says it is gone:\n%s", dom[strings.Index(dom, "<header>"):strings.Index(dom, "</header>")])
	}
}

// TestDashboardRefreshesOneAtATime: when the server answers slower than the refresh period
// (a large store, a loaded instance), the page must wait for one refresh before it starts
// the next: with a timer that fires regardless, refreshes queue up in the browser (which
// sends the same GET once at a time), and a slow server gets the next /v1/metrics the
// moment it answers the last, for ever. With a 2 s period and /v1/metrics taking 3 s, the
// server gets the period's rest between two of them.
func TestDashboardRefreshesOneAtATime(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Observe(window.Event{TS: time.Now().UnixMilli(), Metric: "latency_ms", Key: "tenant-1", Value: 10}); err != nil {
		t.Fatal(err)
	}
	srv, err := query.New(query.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var starts, ends []time.Time
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/metrics" {
			mu.Lock()
			starts = append(starts, time.Now())
			slow := len(starts) > 1
			mu.Unlock()
			if slow {
				time.Sleep(3 * time.Second)
			}
			defer func() { mu.Lock(); ends = append(ends, time.Now()); mu.Unlock() }()
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()

	b := openPage(t, hs.URL+"/", 1280, 1000)
	b.waitRefreshed(1, 20*time.Second)
	b.eval(`(() => { const e = document.getElementById("every"); e.value = "2"; e.dispatchEvent(new Event("change")); return true; })()`, nil)
	time.Sleep(11 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	for i := 2; i < len(starts) && i-1 < len(ends); i++ {
		if rest := starts[i].Sub(ends[i-1]); rest < 1500*time.Millisecond {
			t.Errorf("/v1/metrics number %d came %v after the last one was answered, want the 2 s period's rest (%d requests in 11 s)", i+1, rest.Round(time.Millisecond), len(starts))
		}
	}
	if len(starts) < 3 {
		t.Errorf("%d requests to /v1/metrics in 11 s, want the page to go on refreshing", len(starts))
	}
}
