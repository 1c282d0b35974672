package promapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// TestQueryTextBounded: a query of more than maxQueryTokens tokens is refused as a 400
// naming the parameter before Prometheus' parser reads it, on every route that parses one.
// The parser's time grows with the square of a query's depth (each node asks its children's
// type all the way down), and a chain of binary operators is as deep as it is long: a
// 200 KB x+x+…+x held a core past 120 s on /api/v1/query and /api/v1/parse_query (a
// SIGTERM then waited for it), and a 1 MiB form about ten minutes. Queries within the bound
// are answered, whatever the length of their strings.
func TestQueryTextBounded(t *testing.T) {
	d := newDemo(t, "native:5", 1, 1)
	srv := serveDemo(t, d, Config{})
	// The refusal's message (tokens, levels) is the bound's, not the parser's: no time is
	// asserted, the parser never ran.
	post := func(path, q string) (int, string) {
		t.Helper()
		res, err := http.PostForm(srv.URL+path, url.Values{"query": {q}, "start": {"1799999990"}, "end": {"1800000000"}, "step": {"10"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, readAll(t, res)
	}
	hostile := map[string]string{
		"a chain of 6,000 additions": "x" + strings.Repeat("+x", 6_000),
		"6,000 nested parentheses":   strings.Repeat("(", 6_000) + "1" + strings.Repeat(")", 6_000),
		"12,000 unary minuses":       strings.Repeat("-", 12_000) + "x",
		"6,000 ors":                  "x" + strings.Repeat(" or x", 6_000),
	}
	routes := []string{"/api/v1/query", "/api/v1/query_range", "/api/v1/parse_query", "/api/v1/format_query", "/api/v1/query_exemplars"}
	for name, q := range hostile {
		for _, path := range routes {
			code, body := post(path, q)
			if code != 400 || !strings.Contains(body, `"errorType":"bad_data"`) || !strings.Contains(body, `invalid parameter \"query\"`) ||
				!strings.Contains(body, "tokens") || len(body) > 1000 {
				t.Errorf("%s on %s: %d %.300s", name, path, code, body)
			}
		}
	}

	// (Sizes just past the bound, which the parser reads in a fraction of a second, so that
	// the test ends before the bound too; a 1 MiB form is 80 times the chain.)

	// format_query prints a query at most maxFormatDepth deep: a chain of 1,000 additions
	// (2,001 tokens) took 1.9 s and 1.9 MB, 2,000 took 13 s and 7.8 MB, and the bound on
	// tokens allows 5,000. One level less is printed.
	for _, q := range []string{"x" + strings.Repeat("+x", 1_000), strings.Repeat("(", 1_000) + "x" + strings.Repeat(")", 1_000)} {
		code, body := post("/api/v1/format_query", q)
		if code != 400 || !strings.Contains(body, `invalid parameter \"query\": more than 200 levels deep`) {
			t.Errorf("format_query of %.20s…: %d: %.300s", q, code, body)
		}
	}
	if code, body := post("/api/v1/format_query", strings.Repeat("(", maxFormatDepth-2)+"x"+strings.Repeat(")", maxFormatDepth-2)); code != 200 {
		t.Errorf("format_query within the depth: %d %.300s", code, body)
	}

	// Within the bound: a sum of 1,500 selectors (about 3,000 tokens plus its braces), a
	// regexp of 900 KB in one string, and tokens in strings and comments that do not count.
	long := "sum(latency_ms)" + strings.Repeat(" + sum(latency_ms)", 1_500)
	alts := strings.Repeat("nope|", 80_000)
	for _, q := range []string{`count(latency_ms{key=~"` + alts + `k0aa"})`, "# " + strings.Repeat("(", 50_000) + "\nlatency_ms + " + `count(latency_ms{key!="` + strings.Repeat("(", 50_000) + `"})`} {
		for _, path := range routes {
			if code, body := post(path, q); code != 200 {
				t.Errorf("%.40s… on %s: %d %.300s", q, path, code, body)
			}
		}
	}
	for _, path := range []string{routes[0], routes[1], routes[2], routes[4]} { // too deep to format
		if code, body := post(path, long); code != 200 {
			t.Errorf("the long sum on %s: %d %.300s", path, code, body)
		}
	}
}

// TestUnknownNameHintsBounded: a query of many selectors each naming a distinct unknown
// name gets the nearest-name search (an edit distance to every name slide has: 0.25 s for a
// 250-byte name against 1,000 metrics) for its first maxSuggestions names only; the others
// are warned of without it. Before, every one was searched, twice: a query of 100 such names
// took 25 s, a 1 MiB form about 1,000 s. Counted, not timed: the searches are what cost.
func TestUnknownNameHintsBounded(t *testing.T) {
	d := newDemo(t, "native:5", 1, 1)
	for i := range 50 {
		if err := d.store.ObserveAt(t0.UnixMilli(), window.Event{TS: t0.UnixMilli(), Metric: fmt.Sprintf("metric_number_%04d", i), Key: "k", Value: 1, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var searches atomic.Int64
	counted := closest
	closest = func(name string, names []string) ([]string, int) {
		searches.Add(1)
		return counted(name, names)
	}
	t.Cleanup(func() { closest = counted })
	srv := serveDemo(t, d, Config{})
	var b strings.Builder
	for i := range 40 {
		if i > 0 {
			b.WriteString(" or ")
		}
		fmt.Fprintf(&b, "n%d_%s", i, strings.Repeat("z", 40))
	}
	res, err := http.PostForm(srv.URL+"/api/v1/query", url.Values{"query": {b.String()}})
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != 200 || !strings.Contains(body, "is no name slide has") || !strings.Contains(body, "more warning annotations omitted") {
		t.Errorf("%d %.300s", res.StatusCode, body)
	}
	// Two searches a name given a guess (its nearest name, then the metrics' order), on the
	// engine and on the pushdown's reading: at most four a name, for maxSuggestions names.
	if 4*maxSuggestions >= 2*40 {
		t.Fatalf("40 unknown names do not outnumber maxSuggestions %d enough to tell", maxSuggestions)
	}
	if n := searches.Load(); n == 0 || n > 4*maxSuggestions {
		t.Errorf("%d nearest-name searches for 40 unknown names, want at most %d", n, 4*maxSuggestions)
	}
}
