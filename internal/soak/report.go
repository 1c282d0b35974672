package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// result is everything a run measured; print judges it.
type result struct {
	cfg config

	runs        []produceRun // probes, then the main run
	probeBest   float64      // best delivered rate of the probes; 0 when --rate was given
	produced    int64        // sum of the runs' sent counts
	firstEvent  time.Time    // no event is stamped before this
	maxLag      float64      // records in the log not yet counted by slide, sampled every second
	maxSlideLag float64      // slide_ingest_lag summed over partitions, sampled every second
	drained     bool
	drainTime   time.Duration // from the producer's exit to lag 0 with every event counted

	loadTime      time.Duration
	window, allow *endpointStats

	windowCounts                       []metricCount
	eventsTotal, rejected, expired     int64
	rejectedBy                         map[string]int64
	series, seriesSeen                 int64 // expected (keys × metrics) and slide_ingest_series
	rssStart, rssWarm, rssPeak, rssEnd int64
	bound, producerPeak, brokerRSS     int64
	serveStopErr                       error
	serveLog                           logSummary
	serveLogTail                       string
}

// metricCount is the /v1/window answer over every key of one metric.
type metricCount struct {
	metric              string
	count, series, from int64
}

// rssBound is start + series × perSeriesBytes + fixedAllowance (see the package doc).
func rssBound(start, series int64) int64 { return start + series*perSeriesBytes + fixedAllowance }

func (r *result) boundFormula() string {
	return fmt.Sprintf("%s = start %s + %s series × %d KiB + %s", mib(r.bound), mib(r.rssStart), comma(r.series), perSeriesBytes>>10, mib(fixedAllowance))
}

// mainRun is the last produce run.
func (r *result) mainRun() produceRun {
	if len(r.runs) == 0 {
		return produceRun{}
	}
	return r.runs[len(r.runs)-1]
}

// checks returns one line per broken promise.
func (r *result) checks() []string {
	var f []string
	if n := r.window.failures; n > 0 {
		f = append(f, fmt.Sprintf("/v1/window: %s failed requests (transport errors, 5xx, a 404 after a 200, or a wrong answer)", comma(n)))
	}
	if n := r.allow.failures; n > 0 {
		f = append(f, fmt.Sprintf("/v1/allow: %s failed requests (transport errors, 5xx, or a status that does not match \"allowed\")", comma(n)))
	}
	var windowSum int64
	for _, m := range r.windowCounts {
		windowSum += m.count
		if m.from > r.firstEvent.UnixMilli() {
			f = append(f, fmt.Sprintf("the %s window starts at %d ms, after the first event (%d ms): the run outlived the window and the count cannot be checked",
				m.metric, m.from, r.firstEvent.UnixMilli()))
		}
	}
	if !r.drained {
		f = append(f, fmt.Sprintf("not drained %.1f s after the producer exited: lag or missing events (slide_ingest_events_total %s of %s produced)",
			r.drainTime.Seconds(), comma(r.eventsTotal), comma(r.produced)))
	}
	if windowSum != r.produced {
		f = append(f, fmt.Sprintf("lost or extra events: produced %s, /v1/window counts %s (%+d)", comma(r.produced), comma(windowSum), windowSum-r.produced))
	}
	if r.eventsTotal != r.produced {
		f = append(f, fmt.Sprintf("lost or extra events: produced %s, slide_ingest_events_total %s (%+d)", comma(r.produced), comma(r.eventsTotal), r.eventsTotal-r.produced))
	}
	if r.rejected != 0 {
		f = append(f, fmt.Sprintf("slide_ingest_rejected_total %s, want 0: %v", comma(r.rejected), r.rejectedBy))
	}
	if r.expired != 0 {
		f = append(f, fmt.Sprintf("slide_ingest_expired_total %s, want 0: events older than their window when read", comma(r.expired)))
	}
	if r.seriesSeen > r.series {
		f = append(f, fmt.Sprintf("slide_ingest_series %s, more than the %s the producer can make", comma(r.seriesSeen), comma(r.series)))
	}
	if r.rssPeak > r.bound {
		f = append(f, fmt.Sprintf("peak RSS %s past the bound %s", mib(r.rssPeak), r.boundFormula()))
	}
	if r.rssEnd > r.bound {
		f = append(f, fmt.Sprintf("end RSS %s past the bound %s", mib(r.rssEnd), r.boundFormula()))
	}
	if r.serveStopErr != nil {
		f = append(f, fmt.Sprintf("serve did not exit cleanly on SIGTERM: %v", r.serveStopErr))
	}
	if r.serveLog.errors > 0 {
		f = append(f, fmt.Sprintf("serve logged %d lines at level ERROR", r.serveLog.errors))
	}
	return f
}

// print writes the summary block and PASS or one FAIL line per broken promise, which it
// returns.
func (r *result) print(w io.Writer) []string {
	c := r.cfg
	m := r.mainRun()
	probeEvents := r.produced - m.out.sent
	drained := "consumed all"
	if !r.drained {
		drained = "NOT all consumed"
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "soak %s: produced %s events (%s/s), %s, max lag %s, drained in %.1f s\n",
		c.duration, comma(r.produced), comma(int64(m.out.rate)), drained, comma(int64(r.maxLag)), r.drainTime.Seconds())
	fmt.Fprintf(w, "lag: records in the log not yet counted by slide, sampled every second (max of slide_ingest_lag: %s)\n",
		comma(int64(r.maxSlideLag)))
	if r.probeBest > 0 {
		fmt.Fprintf(w, "rate: main run asked %s/s (best of %d probes), delivered %s/s in %s incl. flush; %s events in probes\n",
			comma(int64(m.target)), len(r.runs)-1, comma(int64(m.out.rate)), m.out.elapsed.Round(time.Millisecond), comma(probeEvents))
	} else if m.target >= flatOut {
		fmt.Fprintf(w, "rate: main run flat out (paced by the broker's acknowledgements), delivered %s/s in %s incl. flush\n",
			comma(int64(m.out.rate)), m.out.elapsed.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "rate: main run asked %s/s (--rate), delivered %s/s in %s incl. flush\n",
			comma(int64(m.target)), comma(int64(m.out.rate)), m.out.elapsed.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "/v1/window: %s\n", r.window.summary(r.loadTime, fmt.Sprintf("200: %s, 404 before the key's first event: %s",
		comma(r.window.byCode[200]), comma(r.window.notYet))))
	fmt.Fprintf(w, "/v1/allow:  %s\n", r.allow.summary(r.loadTime, fmt.Sprintf("allowed (200): %s, denied (429): %s",
		comma(r.allow.byCode[200]), comma(r.allow.byCode[429]))))
	var parts []string
	var windowSum int64
	for _, mc := range r.windowCounts {
		parts = append(parts, fmt.Sprintf("%s %s", mc.metric, comma(mc.count)))
		windowSum += mc.count
	}
	fmt.Fprintf(w, "counts: produced %s; /v1/window key=* 5m: %s = %s; slide_ingest_events_total %s; rejected %s, expired %s; series %s of %s\n",
		comma(r.produced), strings.Join(parts, " + "), comma(windowSum), comma(r.eventsTotal), comma(r.rejected), comma(r.expired),
		comma(r.seriesSeen), comma(r.series))
	fmt.Fprintf(w, "RSS: start %s, after warm-up %s, peak %s, end %s (bound %s)\n",
		mib(r.rssStart), mib(r.rssWarm), mib(r.rssPeak), mib(r.rssEnd), r.boundFormula())
	fmt.Fprintf(w, "     producer peak %s, broker at the end %s (not bounded: the broker keeps the whole log in memory)\n",
		mib(r.producerPeak), mib(r.brokerRSS))
	exit := "clean exit on SIGTERM"
	if r.serveStopErr != nil {
		exit = r.serveStopErr.Error()
	}
	fmt.Fprintf(w, "serve: %s; log: %s\n", exit, r.serveLog)
	for _, e := range r.window.examples {
		fmt.Fprintf(w, "  /v1/window failure: %s\n", e)
	}
	for _, e := range r.allow.examples {
		fmt.Fprintf(w, "  /v1/allow failure: %s\n", e)
	}
	fails := r.checks()
	if len(fails) == 0 {
		fmt.Fprintln(w, "PASS")
	}
	for _, f := range fails {
		fmt.Fprintf(w, "FAIL: %s\n", f)
	}
	return fails
}

// summary is "N requests (R/s), p50 …, p99 …, max …; <extra>, errors E".
func (s *endpointStats) summary(over time.Duration, extra string) string {
	slices.Sort(s.lat)
	n := s.requests()
	rate := 0.0
	if over > 0 {
		rate = float64(n) / over.Seconds()
	}
	return fmt.Sprintf("%s requests (%s/s), p50 %s, p99 %s, max %s; %s; errors %s",
		comma(n), comma(int64(rate)), ms(percentile(s.lat, 0.50)), ms(percentile(s.lat, 0.99)), ms(percentile(s.lat, 1)),
		extra, comma(s.failures))
}

// percentile is the nearest-rank q-quantile of sorted (0 when empty).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999999) - 1 // ceil(q·n) − 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ms formats a latency in milliseconds with about three significant digits.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%d MiB", (b+1<<19)>>20) }

// comma formats n with thousands separators: 12345678 → 12,345,678.
func comma(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// produceLine is what `slide produce` prints when it is done generating.
type produceLine struct {
	sent    int64         // events the broker acknowledged
	elapsed time.Duration // from the start to the end of the flush
	rate    float64       // sent / elapsed, as printed
	volume  string        // value bytes, as printed ("822.4 MiB")
}

var produceRE = regexp.MustCompile(`(?m)^sent (\d+) events \(.*\) to \S+ on \S+ in (\S+): (\d+) events/s, (.+)$`)

// errNoProduceLine means the output holds no "sent N events" line.
var errNoProduceLine = errors.New(`no "sent N events … events/s" line in the output of slide produce`)

// parseProduce reads the summary line of `slide produce` (generated load) from its output.
func parseProduce(out string) (produceLine, error) {
	m := produceRE.FindStringSubmatch(out)
	if m == nil {
		return produceLine{}, errNoProduceLine
	}
	var p produceLine
	var err error
	if p.sent, err = strconv.ParseInt(m[1], 10, 64); err != nil {
		return p, fmt.Errorf("parsing the event count %q: %w", m[1], err)
	}
	if p.elapsed, err = time.ParseDuration(m[2]); err != nil {
		return p, fmt.Errorf("parsing the duration %q: %w", m[2], err)
	}
	if p.rate, err = strconv.ParseFloat(m[3], 64); err != nil {
		return p, fmt.Errorf("parsing the rate %q: %w", m[3], err)
	}
	p.volume = strings.TrimSpace(m[4])
	return p, nil
}

// logSummary counts a slog text log's lines by level and its warnings by message, and keeps
// each message's first line, whose attributes (err, partition…) say why.
type logSummary struct {
	warnings, errors int
	byMsg            map[string]int    // warnings and errors by msg
	first            map[string]string // the first line of each
}

// maxFirstLine is how much of a message's first line the summary shows.
const maxFirstLine = 400

func summarizeLog(out string) logSummary {
	s := logSummary{byMsg: map[string]int{}, first: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		var level string
		switch {
		case strings.Contains(line, " level=WARN "):
			s.warnings++
			level = "WARN"
		case strings.Contains(line, " level=ERROR "):
			s.errors++
			level = "ERROR"
		default:
			continue
		}
		msg := line
		if _, rest, ok := strings.Cut(line, " msg="); ok {
			if strings.HasPrefix(rest, `"`) {
				if q, err := strconv.QuotedPrefix(rest); err == nil {
					msg, _ = strconv.Unquote(q)
				}
			} else {
				msg, _, _ = strings.Cut(rest, " ")
			}
		}
		k := level + " " + msg
		if s.byMsg[k]++; s.byMsg[k] == 1 {
			if len(line) > maxFirstLine {
				line = line[:maxFirstLine] + "…"
			}
			s.first[k] = line
		}
	}
	return s
}

func (s logSummary) String() string {
	if s.warnings == 0 && s.errors == 0 {
		return "no warnings or errors"
	}
	keys := make([]string, 0, len(s.byMsg))
	for k := range s.byMsg {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return s.byMsg[keys[i]] > s.byMsg[keys[j]] || s.byMsg[keys[i]] == s.byMsg[keys[j]] && keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	var firsts strings.Builder
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d× %q", s.byMsg[k], k)
		fmt.Fprintf(&firsts, "\n  first: %s", s.first[k])
	}
	return fmt.Sprintf("%d warnings, %d errors: %s%s", s.warnings, s.errors, strings.Join(parts, ", "), firsts.String())
}
