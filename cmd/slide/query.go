package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

const queryUsage = `usage: slide query <window|range|top|series|metrics|quota> [flags]

Asks a running slide serve and prints a table (--json: the API's JSON as it came).

  slide query window  --metric latency_ms --key tenant-42 [--window 5m] [--q 0.5,0.95,0.99]
  slide query window  --metric latency_ms --match 'route="/pay"' --by code
  slide query range   --metric latency_ms --key tenant-42 [--window 10s] [--step 10s] [--span 5m] [--plot p95]
  slide query top     --metric latency_ms [--by p95] [--window 5m] [--k 10] [--key 'tenant-*']
  slide query series  [--metric latency_ms] [--prefix tenant-] [--match 'code=~"5.."'] [--limit 100] [--all]
  slide query metrics
  slide query quota   --policy daily-requests --key tenant-1

A --key holding '*' merges every matching series. --match takes PromQL label matchers as
written inside a selector's braces (route="/pay",code=~"5.."); window and range take --by
label,label for one answer per group. --window defaults to the metric's retention. Run
'slide query <command> --help' for its flags and examples.
`

// queryClient is what every query subcommand shares: where the API is and how to print.
type queryClient struct {
	addr    string
	json    bool
	timeout time.Duration
	http    *http.Client
	// where says how to point slide query at another server, for a call that fails.
	where string
}

// defaultQueryURL is --addr's default, where make run's server listens (a variable for the
// tests, which must not dial a port another program may hold).
var defaultQueryURL = "http://127.0.0.1:8080"

func (c *queryClient) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", defaultQueryURL, "base URL of slide serve's HTTP API")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON instead of a table")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up on a request after this long")
}

func cmdQuery(ctx context.Context, args []string, s stdio) error {
	if len(args) == 0 {
		fmt.Fprint(s.err, queryUsage)
		return errUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprint(s.out, queryUsage)
		return errHelp
	}
	sub, args := args[0], args[1:]
	var c queryClient
	fs := newFlagSet("query "+sub, s.out)
	c.register(fs)
	v := url.Values{}
	str := func(name, def, help string) *string { return fs.String(name, def, help) }
	var run func() error
	switch sub {
	case "window":
		metric, key := str("metric", "", "metric name (required)"), str("key", "", "series key, or a glob with '*' (required unless --match or --by)")
		match, by := str("match", "", matchHelp), str("by", "", byHelp)
		win, q := str("window", "", "window, a multiple of the slot width (default: the retention)"), str("q", "0.5,0.95,0.99", "quantiles, fractions or pNN")
		run = func() error {
			if *metric == "" || *key == "" && *match == "" && *by == "" {
				return queryUsageErr(fs, s, "--metric and --key (or --match or --by) are required")
			}
			set(v, "metric", *metric, "key", *key, "match", *match, "by", *by, "window", *win, "q", *q)
			return c.window(ctx, v, s.out)
		}
	case "range":
		metric, key := str("metric", "", "metric name (required)"), str("key", "", "series key, or a glob with '*' (required unless --match or --by)")
		match, by := str("match", "", matchHelp), str("by", "", byHelp)
		win, step := str("window", "", "window of each point (default: one slot)"), str("step", "", "time between points (default: one slot)")
		span := str("span", "", "how far back the points reach (default: the retention, or the window when longer; a tiered ring's tiers reach further)")
		q, plot := str("q", "0.5,0.95,0.99", "quantiles, fractions or pNN"), str("plot", "p95", "column the chart draws: count, sum, avg, max, rate or a quantile pNN")
		run = func() error {
			if *metric == "" || *key == "" && *match == "" && *by == "" {
				return queryUsageErr(fs, s, "--metric and --key (or --match or --by) are required")
			}
			set(v, "metric", *metric, "key", *key, "match", *match, "by", *by, "window", *win, "step", *step, "span", *span, "q", *q)
			return c.rangeRead(ctx, v, *plot, s.out)
		}
	case "top":
		metric, by := str("metric", "", "metric name (required)"), str("by", "p95", "rank by "+window.StatNames+" or pNN")
		win, q := str("window", "", "window (default: the retention)"), str("q", "0.5,0.95,0.99", "quantiles to show per key")
		key, match := str("key", "", "only keys matching this glob"), str("match", "", matchHelp)
		k := fs.Int("k", 10, "how many keys")
		run = func() error {
			if *metric == "" {
				return queryUsageErr(fs, s, "--metric is required")
			}
			set(v, "metric", *metric, "by", *by, "window", *win, "q", *q, "key", *key, "match", *match, "k", strconv.Itoa(*k))
			return c.top(ctx, v, s.out)
		}
	case "series":
		metric, prefix := str("metric", "", "metric name (default: every metric)"), str("prefix", "", "only keys starting with this")
		match := str("match", "", matchHelp)
		limit, cursor := fs.Int("limit", 100, "series per page"), str("cursor", "", "continue after this cursor (from a previous page)")
		all := fs.Bool("all", false, "follow every page")
		run = func() error {
			set(v, "metric", *metric, "prefix", *prefix, "match", *match, "limit", strconv.Itoa(*limit), "cursor", *cursor)
			return c.series(ctx, v, *all, s.out)
		}
	case "metrics":
		run = func() error { return c.metrics(ctx, s.out) }
	case "quota":
		policy, key := str("policy", "", "policy or usage rule (required)"), str("key", "", "the key, e.g. a tenant (required)")
		run = func() error {
			if *policy == "" || *key == "" {
				return queryUsageErr(fs, s, "--policy and --key are required")
			}
			set(v, "policy", *policy, "key", *key)
			return c.quota(ctx, v, s.out)
		}
	default:
		if strings.HasPrefix(sub, "-") {
			return &usageError{cmd: "query", msg: fmt.Sprintf("%s before the command: flags go after it, e.g. slide query window --addr URL; want window, range, top, series, metrics or quota", shellWord(sub))}
		}
		meant := meantCommand(sub, "window", "range", "top", "series", "metrics", "quota")
		return &usageError{cmd: "query", msg: fmt.Sprintf("unknown command %s%s; want window, range, top, series, metrics or quota", shellWord(sub), meant)}
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkNumbers(fs, nil, "timeout", "k", "limit"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return queryUsageErr(fs, s, fmt.Sprintf("unexpected argument %q (flags go after the command: slide query %s --metric ...)", fs.Arg(0), sub))
	}
	base, err := normalizeAddr(c.addr)
	if err != nil {
		return flagErrorf(fs, "addr", "%v", err) // names SLIDE_URL when the value came from there
	}
	c.addr = base
	c.http = &http.Client{Timeout: c.timeout}
	c.where = whereHint(fs, os.LookupEnv)
	return run()
}

// The help of --match and --by, which several subcommands take.
const (
	matchHelp = `only series these PromQL label matchers select, as written inside a selector's braces: route="/pay",code=~"5.."`
	byHelp    = "one answer per group of these labels, such as code or route,code (key groups by key)"
)

// selected is how a title names the metric and the series a read selected: the metric, the
// key, then {match} when given; a read of neither (--by alone) is the metric alone.
func selected(metric, key, match string) string {
	s := shown(metric)
	if key != "" {
		s += " " + shown(key)
	}
	if match != "" {
		s += " {" + shown(match) + "}"
	}
	return s
}

// labelSet writes a group's labels as PromQL does, {code="503",route="/pay"}, in the order
// of by; a label the group's series lack is left out, as the API leaves it out.
func labelSet(labels map[string]string, by []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for _, name := range by {
		v, ok := labels[name]
		if !ok {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(name + "=" + strconv.Quote(v))
	}
	b.WriteByte('}')
	return shown(b.String())
}

// seriesName is a listed series as a table prints it: its key, then its labels in name
// order ({code="503",route="/pay"}) when it has any.
func seriesName(key string, labels map[string]string) string {
	if len(labels) == 0 {
		return shown(key)
	}
	names := slices.Sorted(maps.Keys(labels))
	return shown(key) + labelSet(labels, names)
}

func queryUsageErr(fs *flag.FlagSet, _ stdio, msg string) error {
	return usagef(fs, "%s", msg)
}

// set adds the non-empty name/value pairs to v.
func set(v url.Values, kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
}

// shown is a key, metric or message as a table prints it: as it is when every rune is one
// strconv.IsPrint accepts (letters, marks, numbers, punctuation, symbols, the ASCII space),
// else Go-quoted, so a control character, a bidi override or a tab (which would shift the
// table's columns) is seen as its escape and never acts on the terminal. No door admits such
// a key (window.ValidName), but a store restored before it did, or a peer, could still hold one.
func shown(s string) string {
	for _, r := range s {
		if !strconv.IsPrint(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}

func (c *queryClient) window(ctx context.Context, v url.Values, w io.Writer) error {
	var a query.WindowResponse
	if done, err := c.answer(ctx, "/v1/window", v, w, &a); done {
		return err
	}
	if a.By != nil {
		return windowGroups(w, &a)
	}
	fmt.Fprintf(w, "%s over %s, %s\n", selected(a.Metric, a.Key, a.Match), a.Window, span(a.From, a.To))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if strings.Contains(a.Key, "*") || a.Match != "" {
		fmt.Fprintf(tw, "series\t%d\n", a.Series)
	}
	fmt.Fprintf(tw, "count\t%d\nsum\t%s\navg\t%s\nmin\t%s\nmax\t%s\nrate/s\t%s\n",
		a.Count, num(&a.Sum), num(a.Avg), num(a.Min), num(a.Max), num(&a.RatePerS))
	if a.ElapsedS != nil { // rate/s's denominator: the part of the span that has passed
		fmt.Fprintf(tw, "elapsed\t%ss\n", num(a.ElapsedS))
	}
	for _, q := range sortedQuantiles(a.Quantiles) {
		fmt.Fprintf(tw, "%s\t%s\n", pname(q), num(a.Quantiles[q]))
	}
	return tw.Flush()
}

// windowGroups prints a grouped /v1/window answer: one row a group, its by-labels in the
// first columns ("-" for a label its series lack).
func windowGroups(w io.Writer, a *query.WindowResponse) error {
	var from, to int64
	var qs []string
	if len(a.Groups) > 0 {
		from, to, qs = a.Groups[0].From, a.Groups[0].To, sortedQuantiles(a.Groups[0].Quantiles)
	}
	fmt.Fprintf(w, "%s by %s over %s, %s\n", selected(a.Metric, a.Key, a.Match), shown(strings.Join(a.By, ",")), a.Window, span(from, to))
	printWarnings(w, a.Warnings)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, name := range a.By {
		fmt.Fprintf(tw, "%s\t", shown(name))
	}
	fmt.Fprint(tw, "series\tcount\tavg\tmin\tmax\trate/s")
	for _, q := range qs {
		fmt.Fprintf(tw, "\t%s", pname(q))
	}
	fmt.Fprint(tw, "\t\n")
	for _, g := range a.Groups {
		for _, name := range a.By {
			v, ok := g.Labels[name]
			if !ok {
				v = "-"
			}
			fmt.Fprintf(tw, "%s\t", shown(v))
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s", g.Series, g.Count, num(g.Avg), num(g.Min), num(g.Max), num(&g.RatePerS))
		for _, q := range qs {
			fmt.Fprintf(tw, "\t%s", num(g.Quantiles[q]))
		}
		fmt.Fprint(tw, "\t\n")
	}
	return tw.Flush()
}

// printWarnings writes an answer's warnings, each on a line of its own.
func printWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintf(w, "warning: %s\n", shown(m))
	}
}

func (c *queryClient) top(ctx context.Context, v url.Values, w io.Writer) error {
	var a query.TopResponse
	if done, err := c.answer(ctx, "/v1/top", v, w, &a); done {
		return err
	}
	fmt.Fprintf(w, "%s: top %d of %d series by %s over %s, %s\n", shown(a.Metric), len(a.Top), a.Series, shown(a.By), a.Window, span(a.From, a.To))
	var qs []string
	if len(a.Top) > 0 {
		qs = sortedQuantiles(a.Top[0].Quantiles)
	}
	// The ranking value gets its own column unless one of the usual columns shows it.
	by := strings.ToLower(a.By)
	if _, err := strconv.ParseFloat(by, 64); err == nil {
		by = pname(by)
	}
	byColumn := by != "count" && by != "rate" && by != "max" && !slices.ContainsFunc(qs, func(q string) bool { return pname(q) == by })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "#\tkey\t")
	if byColumn {
		fmt.Fprintf(tw, "%s\t", by)
	}
	fmt.Fprint(tw, "count\trate/s")
	for _, q := range qs {
		fmt.Fprintf(tw, "\t%s", pname(q))
	}
	fmt.Fprint(tw, "\tmax\t\n")
	for i, e := range a.Top {
		fmt.Fprintf(tw, "%d\t%s\t", i+1, seriesName(e.Key, e.Labels))
		if byColumn {
			fmt.Fprintf(tw, "%s\t", num(&e.Value))
		}
		fmt.Fprintf(tw, "%d\t%s", e.Count, num(&e.RatePerS))
		for _, q := range qs {
			fmt.Fprintf(tw, "\t%s", num(e.Quantiles[q]))
		}
		fmt.Fprintf(tw, "\t%s\t\n", num(e.Max))
	}
	return tw.Flush()
}

type seriesJSON struct {
	Series []struct {
		Metric, Key string
		Labels      map[string]string
	} `json:"series"`
	Next string `json:"next"`
}

func (c *queryClient) series(ctx context.Context, v url.Values, all bool, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if !c.json {
		fmt.Fprint(tw, "metric\tkey\n")
	}
	for pages := 0; ; pages++ {
		body, err := c.get(ctx, "/v1/series", v)
		if err != nil {
			return err
		}
		var a seriesJSON
		if err := json.Unmarshal(body, &a); err != nil {
			return fmt.Errorf("decoding /v1/series answer: %w", err)
		}
		if c.json {
			if err := printJSON(w, body); err != nil {
				return err
			}
		} else {
			for _, s := range a.Series {
				fmt.Fprintf(tw, "%s\t%s\n", shown(s.Metric), seriesName(s.Key, s.Labels))
			}
		}
		if a.Next == "" {
			break
		}
		if !all {
			if !c.json {
				tw.Flush()
				fmt.Fprintf(w, "more: --cursor %s (or --all)\n", a.Next)
			}
			break
		}
		v.Set("cursor", a.Next)
	}
	return tw.Flush()
}

func (c *queryClient) metrics(ctx context.Context, w io.Writer) error {
	var a struct {
		Metrics []struct {
			Name            string
			Series          int
			Slot, Retention string
			Slots           int
		} `json:"metrics"`
	}
	if done, err := c.answer(ctx, "/v1/metrics", nil, w, &a); done {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "metric\tseries\tslot\tslots\tretention\n")
	for _, m := range a.Metrics {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", shown(m.Name), m.Series, m.Slot, m.Slots, m.Retention)
	}
	return tw.Flush()
}

// span formats [from, to) in UTC, as the API's unix milliseconds mean; to's date is left out
// when it is from's (a window of days without it read as an empty span).
func span(from, to int64) string {
	f, t := time.UnixMilli(from).UTC(), time.UnixMilli(to).UTC()
	end := t.Format("15:04:05Z")
	if !sameDay(f, t) {
		end = t.Format("2006-01-02T15:04:05Z")
	}
	return fmt.Sprintf("[%s, %s)", f.Format("2006-01-02T15:04:05Z"), end)
}

func sameDay(a, b time.Time) bool { return a.Year() == b.Year() && a.YearDay() == b.YearDay() }

// num prints a number for a table: whole numbers and magnitudes from 1000 up as integers,
// others with 4 significant digits (sketch quantiles are only 1% exact anyway), null as "-".
func num(p *float64) string {
	if p == nil {
		return "-"
	}
	v := *p
	if v == math.Trunc(v) && math.Abs(v) < 1e15 || math.Abs(v) >= 1000 && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// sortedQuantiles returns the quantile keys ("0.5", "0.95") in numeric order.
func sortedQuantiles(m map[string]*float64) []string {
	qs := make([]string, 0, len(m))
	for q := range m {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b string) int {
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return qs
}

// pname turns a quantile key into a column name: 0.95 → p95, 0.999 → p99.9
// (window.FormatPercentile); a key that is no quantile stays as it came, after a "q".
func pname(q string) string {
	f, err := strconv.ParseFloat(q, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return "q" + q
	}
	return window.FormatPercentile(f)
}
