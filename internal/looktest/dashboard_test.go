package looktest

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium runs headless Chromium on url with a fresh profile, lets the page's scripts run
// for budget of virtual time, and returns stdout (the DOM with --dump-dom) and the console
// messages the page logged.
func chromium(t *testing.T, url string, budget time.Duration, extra ...string) (stdout string, console []string) {
	t.Helper()
	bin := need(t, "chromium", "chromium")
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
		"--virtual-time-budget=" + strconv.Itoa(int(budget.Milliseconds()))}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	for line := range strings.SplitSeq(errb.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	return out.String(), console
}

// dashboardServe starts slide serve with a policy and fills two metrics with history: two
// minutes of latency_ms (10 s slots; tenant-1's labelled code=200, or code=503 one time in
// ten: 15 errors of 150) and ten minutes of cost (1 m slots; ranked by sum tenant-0..3, by
// p95 tenant-2, 1, 0, 3), plus a few limiter decisions.
func dashboardServe(t *testing.T) string {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(pol, []byte("policies:\n  - name: api\n    algorithm: token_bucket\n    capacity: 3\n    refill_per_second: 0.001\n    backend: memory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serve(t, "--policies", pol)
	now := time.Now().UnixMilli()
	var lines []string
	for i := range 600 {
		ts := now - int64(i)*200 // one every 200 ms over the last 2 minutes
		labels := ""
		if i%4 == 1 {
			labels = `,"labels":{"code":"200"}`
			if (i/4)%10 == 0 {
				labels = `,"labels":{"code":"503"}`
			}
		}
		lines = append(lines, fmt.Sprintf(`{"ts":%d,"key":"tenant-%d","metric":"latency_ms","value":%d%s}`, ts, i%4, 20+(i*37)%300, labels))
	}
	// cost: events of value v per key, spread over the last ten minutes.
	for k, c := range []struct{ n, v int }{{200, 5}, {20, 30}, {4, 100}, {100, 2}} {
		for j := range c.n {
			lines = append(lines, fmt.Sprintf(`{"ts":%d,"key":"tenant-%d","metric":"cost","value":%d}`, now-int64(j)*590_000/int64(c.n), k, c.v))
		}
	}
	post(t, base, lines)
	for i := range 5 {
		resp, err := http.Post(base+"/v1/allow", "application/json", strings.NewReader(`{"policy":"api","key":"tenant-1"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 429}[i < 3]; resp.StatusCode != want {
			t.Fatalf("allow %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	return base
}

var polylineRE = regexp.MustCompile(`<polyline [^>]*data-series="([^"]+)"[^>]*data-n="(\d+)"`)

// panel is the DOM of the dashboard panel of metric, "" when there is none.
func panel(dom, metric string) string {
	i := strings.Index(dom, `<div class="panel" data-metric="`+metric+`"`)
	if i < 0 {
		return ""
	}
	rest := dom[i+1:]
	if j := strings.Index(rest, `<div class="panel"`); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// drawn is the number of points of each line drawn in a panel, by series name.
func drawn(panelDOM string) map[string]int {
	out := map[string]int{}
	for _, m := range polylineRE.FindAllStringSubmatch(panelDOM, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = max(out[m[1]], n)
	}
	return out
}

// TestDashboardInChromium loads the dashboard in headless Chromium with a window of 1h,
// which cost's ring (1 m × 60) can give and latency_ms's (10 s × 30) cannot: both panels
// draw their charts from /v1/range, latency_ms says it shows its retention instead, cost's
// table covers 1h, the limiter's decisions and readiness are shown, and the page logs
// nothing to the console. Then it takes a screenshot and checks the chart colours are in it.
func TestDashboardInChromium(t *testing.T) {
	base := dashboardServe(t)
	dom, console := chromium(t, base+"/?window=1h", 5*time.Second, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `data-refreshed="`) {
		t.Fatalf("the page never finished a refresh:\n%s", dom)
	}
	if m := regexp.MustCompile(`<pre id="console-errors">([^<]*)</pre>`).FindStringSubmatch(dom); m == nil || m[1] != "" {
		t.Errorf("page errors: %v", m)
	}
	lat, cost := panel(dom, "latency_ms"), panel(dom, "cost")
	if lat == "" || cost == "" {
		t.Fatalf("panels missing:\n%s", dom)
	}
	// 2 minutes of 10 s slots: 12 or 13 slots hold data, every quantile line draws them.
	for _, s := range []string{"p50", "p95", "p99"} {
		if n := drawn(lat)[s]; n < 12 {
			t.Errorf("latency_ms %s line has %d points, want ≥ 12 (%v)", s, n, drawn(lat))
		}
	}
	if n := drawn(lat)["rate/s"]; n != 30 {
		t.Errorf("latency_ms rate line has %d points, want one per slot, 30", n)
	}
	if n := drawn(cost)["sum"]; n != 60 {
		t.Errorf("cost sum line has %d points, want 60 (%v)", n, drawn(cost))
	}
	for _, want := range []string{"1h is longer than the retention of latency_ms: showing 5m", "top 5 of 5 keys by p95 over 5m", "values in ms", "p95 (ms) ▼"} {
		if !strings.Contains(lat, want) {
			t.Errorf("latency_ms panel lacks %q", want)
		}
	}
	// cost is an amount: ranked by sum, not by p95 (which would put tenant-2 first).
	if !strings.Contains(cost, "top 4 of 4 keys by sum over 1h") || strings.Contains(cost, "longer than the retention") || !strings.Contains(cost, "sum ▼") {
		t.Errorf("cost panel does not rank by sum over 1h:\n%s", cost)
	}
	if got := tableKeys(cost); strings.Join(got, " ") != "tenant-0 tenant-1 tenant-2 tenant-3" {
		t.Errorf("cost table in order %v, want tenant-0..3 (by sum)", got)
	}
	if !strings.Contains(lat, `href="?view=key&amp;key=tenant-1"`) || !strings.Contains(lat, `{code=503}`) {
		t.Errorf("latency_ms table does not link keys to their page or show their labels:\n%s", lat)
	}
	for _, want := range []string{`class="badge ok">ready<`, "1 live", "limiter decisions by policy and result", ">api<", ">3<", ">2<", "40.0%"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	shot := filepath.Join(t.TempDir(), "dashboard.png")
	_, console = chromium(t, base+"/?by=sum", 5*time.Second, "--screenshot="+shot, "--window-size=1280,1400", "--hide-scrollbars")
	if len(console) > 0 {
		t.Errorf("console messages (sort by sum):\n%s", strings.Join(console, "\n"))
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The lines' colours: p50/sum/rate blue #2563eb, p95 red #dc2626, p99 violet #7c3aed.
	want := map[string][3]uint32{"blue": {0x25, 0x63, 0xeb}, "red": {0xdc, 0x26, 0x26}, "violet": {0x7c, 0x3a, 0xed}}
	found := map[string]int{}
	bnd := img.Bounds()
	for y := bnd.Min.Y; y < bnd.Max.Y; y++ {
		for x := bnd.Min.X; x < bnd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			for name, c := range want {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(b>>8, c[2]) {
					found[name]++
				}
			}
		}
	}
	t.Logf("screenshot %s: %dx%d, line pixels %v", shot, bnd.Dx(), bnd.Dy(), found)
	for name := range want {
		if found[name] < 100 {
			t.Errorf("screenshot has %d %s line pixels, want ≥ 100: the charts did not draw", found[name], name)
		}
	}
	if dir := os.Getenv("SLIDE_SCREENSHOT_DIR"); dir != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(filepath.Join(dir, "dashboard.png"), b, 0o644)
	}
}

var tableKeyRE = regexp.MustCompile(`<td class="key"[^>]*><a [^>]*>([^<]*)</a>`)

// tableKeys is the keys of a panel's table, in order.
func tableKeys(panelDOM string) []string {
	var out []string
	for _, m := range tableKeyRE.FindAllStringSubmatch(panelDOM, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDashboardKeyFilterAndKeyPage: a key glob in the address narrows every table and chart
// to the keys it matches and stays in the view's link; a key's page draws each of its
// metrics over time (quantiles, rate), by its code label, and its errors (the 503s).
func TestDashboardKeyFilterAndKeyPage(t *testing.T) {
	base := dashboardServe(t)
	dom, console := chromium(t, base+"/?key=tenant-2*&by=p95", 5*time.Second, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	lat, cost := panel(dom, "latency_ms"), panel(dom, "cost")
	for name, p := range map[string]string{"latency_ms": lat, "cost": cost} {
		if got := tableKeys(p); len(got) != 1 || got[0] != "tenant-2" {
			t.Errorf("%s table with key=tenant-2*: %v, want [tenant-2]", name, got)
		}
		if !strings.Contains(p, "top 1 of 1 keys by p95 over") || !strings.Contains(p, "keys matching tenant-2*") || !strings.Contains(p, "per 10s, keys tenant-2*") && !strings.Contains(p, "per 1m, keys tenant-2*") {
			t.Errorf("%s panel does not say it shows keys matching tenant-2*:\n%s", name, p)
		}
	}
	// tenant-2's latency: 150 events in 12 or 13 slots, every quantile line drawn.
	if n := drawn(lat)["p95"]; n < 12 {
		t.Errorf("latency_ms p95 of tenant-2* has %d points, want ≥ 12", n)
	}
	if !regexp.MustCompile(`<a id="share"[^>]* href="\?key=tenant-2\*&amp;by=p95"`).MatchString(dom) {
		t.Errorf("the view's link does not keep the filter:\n%s", dom)
	}

	dom, console = chromium(t, base+"/?view=key&key=tenant-1", 5*time.Second, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages (key page):\n%s", strings.Join(console, "\n"))
	}
	if m := regexp.MustCompile(`<pre id="console-errors">([^<]*)</pre>`).FindStringSubmatch(dom); m == nil || m[1] != "" {
		t.Errorf("page errors: %v", m)
	}
	lat, cost = panel(dom, "latency_ms"), panel(dom, "cost")
	if lat == "" || cost == "" || !strings.Contains(dom, `<h2 id="keytitle">key tenant-1</h2>`) {
		t.Fatalf("key page of tenant-1 lacks its title or panels:\n%s", dom)
	}
	d := drawn(lat)
	for _, s := range []string{"p50", "p95", "p99", "code=200", "code=503", "errors/s", "error %"} {
		if d[s] < 12 {
			t.Errorf("tenant-1's latency_ms line %s has %d points, want ≥ 12 (%v)", s, d[s], d)
		}
	}
	if d["rate/s"] != 30 {
		t.Errorf("tenant-1's rate line has %d points, want 30", d["rate/s"])
	}
	for _, want := range []string{"p95 per 10s by code", "events per second by code", "errors per second (code 5xx or error)", "15 errors of 150 events over the retention (10.0%)", "labels code"} {
		if !strings.Contains(lat, want) {
			t.Errorf("tenant-1's latency_ms panel lacks %q", want)
		}
	}
	if drawn(cost)["sum"] != 60 || !strings.Contains(cost, "carry no status label") {
		t.Errorf("tenant-1's cost panel: lines %v, want a sum line of 60 points and no errors:\n%s", drawn(cost), cost)
	}
	if !strings.Contains(dom, `href="?view=key&amp;key=tenant-1&amp;group=code"`) {
		t.Errorf("the key page's link does not keep the key and group")
	}
}

func near(a, b uint32) bool { return a+12 >= b && b+12 >= a }
