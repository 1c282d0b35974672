package query

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/window"
)

// ExportSpec publishes the window aggregates of every series of one metric as gauges on
// /metrics: for "latency_ms:5m:0.95,0.99", slide_window_quantile{metric="latency_ms",
// key=...,window="5m",quantile="0.95"} and so on, read from the store at scrape time.
type ExportSpec struct {
	Metric string
	Window time.Duration
	aggs   []window.Stat
}

// defaultExportAggs are exported when a spec names no aggregate.
const defaultExportAggs = "count,0.5,0.95,0.99"

// ErrExportSpec wraps every problem ParseExportSpecs reports.
var ErrExportSpec = errors.New("bad export spec")

// ParseExportSpecs reads --export-windows: specs separated by ';', each
// metric:window[:aggregates] where aggregates is a comma list of quantiles (0.95, p99) and
// count, sum, avg, min, max, rate. Without aggregates a spec exports count, 0.5, 0.95 and
// 0.99. Example: "latency_ms:5m:0.95,0.99;cost:1h:sum,count". An empty string is no spec.
// Specs of one metric and window are one spec of all their aggregates: a series has one
// summary, so a second would be a duplicate the scrape drops. Whether the window fits the
// metric's ring is checked by New.
func ParseExportSpecs(s string) ([]ExportSpec, error) {
	var out []ExportSpec
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		e, err := parseExportSpec(part)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(out, func(o ExportSpec) bool { return o.Metric == e.Metric && o.Window == e.Window })
		if i < 0 {
			out = append(out, e)
			continue
		}
		for _, a := range e.aggs {
			if !containsAgg(out[i].aggs, a) {
				out[i].aggs = append(out[i].aggs, a)
			}
		}
	}
	return out, nil
}

func parseExportSpec(s string) (ExportSpec, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s (want metric:window[:aggregates], e.g. latency_ms:5m:0.95,0.99)", ErrExportSpec, s, fmt.Sprintf(format, args...))
	}
	// The window and the aggregates contain no ':', so split from the right: metric names
	// may hold colons, as Prometheus recording rules' do.
	var metric, win, aggs string
	fields := strings.Split(s, ":")
	switch {
	case len(fields) < 2:
		return ExportSpec{}, bad("missing window")
	case len(fields) == 2:
		metric, win, aggs = fields[0], fields[1], defaultExportAggs
	default:
		// The last field is the window when it is a duration with a unit ("0" is a quantile).
		last := strings.TrimSpace(fields[len(fields)-1])
		_, durErr := window.ParseDuration(last)
		_, numErr := strconv.ParseFloat(last, 64)
		if durErr == nil && numErr != nil {
			metric, win, aggs = strings.Join(fields[:len(fields)-1], ":"), last, defaultExportAggs
		} else {
			metric, win, aggs = strings.Join(fields[:len(fields)-2], ":"), fields[len(fields)-2], last
		}
	}
	metric, win = strings.TrimSpace(metric), strings.TrimSpace(win)
	if metric == "" {
		return ExportSpec{}, bad("empty metric")
	}
	d, err := window.ParseWindow(win)
	if err != nil {
		return ExportSpec{}, bad("window %v", err)
	}
	e := ExportSpec{Metric: metric, Window: d}
	for f := range strings.SplitSeq(aggs, ",") {
		a, ok := window.ParseStat(f)
		if !ok {
			return ExportSpec{}, bad("aggregate %q is not %s or a quantile such as 0.95", strings.TrimSpace(f), window.StatNames)
		}
		if !containsAgg(e.aggs, a) {
			e.aggs = append(e.aggs, a)
		}
	}
	return e, nil
}

func containsAgg(as []window.Stat, a window.Stat) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// String formats the spec as ParseExportSpecs reads it, quantiles as fractions.
func (e ExportSpec) String() string {
	var b strings.Builder
	b.WriteString(e.Metric)
	b.WriteByte(':')
	b.WriteString(window.FormatDuration(e.Window))
	for i, a := range e.aggs {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		if a.Kind == window.StatQuantile {
			b.Write(formatQuantile(nil, a.Q))
		} else {
			b.WriteString(a.String())
		}
	}
	return b.String()
}

func (e ExportSpec) validate(rc window.RingConfig) error {
	if e.Metric == "" {
		return errors.New("empty metric")
	}
	if len(e.aggs) == 0 {
		return errors.New("no aggregate (build specs with ParseExportSpecs)")
	}
	return rc.CheckWindow(e.Window, "", e.Metric)
}

// quantiles returns the spec's quantiles in order.
func (e ExportSpec) quantiles() []float64 {
	var qs []float64
	for _, a := range e.aggs {
		if a.Kind == window.StatQuantile {
			qs = append(qs, a.Q)
		}
	}
	return qs
}

// exportCollector reads the exported windows from the store at scrape time. Series are
// taken in key order up to the cap, so the exported set is stable from one scrape to the
// next (Prometheus dislikes series that come and go).
//
// Families, named and typed as promtool check metrics wants: count, sum and quantiles of a
// window are one summary, slide_window{metric,key,window,quantile} with slide_window_count
// and slide_window_sum; avg, min, max and rate are gauges; --export-histograms windows are
// native histograms, slide_window_values (see histogramExport), counted here in the skipped
// series. A series that cannot be exported (exportable) is left out of the scrape and counted
// in slide_window_export_errors_total{reason}; the collector goes on with the next.
//
// A labelled series carries its labels besides key (export_labels.go), so the descriptors
// of each set of label names are built at scrape time; Describe sends the base ones. (A
// pedantic registry, which holds each metric to a described descriptor, would refuse them.)
type exportCollector struct {
	s       *Server
	base    exportDescs
	skipped *prometheus.Desc
}

// exportDescs are the families of the window exports, with one set of label names.
type exportDescs struct {
	summary, avg, min, max, rate *prometheus.Desc
}

// newExportDescs builds the window exports' families with labels metric, key, window and
// then extra.
func newExportDescs(extra []string) exportDescs {
	l := append([]string{"metric", "key", "window"}, extra...)
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, l, nil) }
	return exportDescs{
		summary: d("slide_window", "Quantiles of the values in the window of a series, within the sketch's accuracy (absent when the window is empty), with the window's count and sum (--export-windows). Not cumulative: the window slides."),
		avg:     d("slide_window_avg", "Mean value in the window of a series; absent when the window is empty."),
		min:     d("slide_window_min", "Smallest value in the window of a series; absent when the window is empty."),
		max:     d("slide_window_max", "Largest value in the window of a series; absent when the window is empty."),
		rate:    d("slide_window_rate_per_second", "Events per second over the elapsed part of the window of a series."),
	}
}

// Reasons of slide_window_export_errors_total.
const (
	exportInvalidUTF8   = "invalid_utf8"   // a key that is not UTF-8: no exposition format carries it
	exportInvalidMetric = "invalid_metric" // client_golang refused to build the series' metric
)

// newExportErrors is slide_window_export_errors_total, shared by the window and histogram
// exports and collected by exportCollector.
func newExportErrors() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slide_window_export_errors_total",
		Help: "Series left out of a /metrics scrape because they cannot be exported, by reason: invalid_utf8 (a key that is not UTF-8, which no exposition format carries), invalid_metric (client_golang refused the metric). Each scrape counts them again; the scrape goes on with the other series.",
	}, []string{"reason"})
	v.WithLabelValues(exportInvalidUTF8)
	v.WithLabelValues(exportInvalidMetric)
	return v
}

// exportable reports whether key can be a label value of an exported series, counting it
// in errs when not. No door admits a key that is not UTF-8 (window.ValidName), but a store
// fed around them (a library caller, state restored by an older build) can hold one, and
// client_golang panics on it or Prometheus refuses the whole scrape.
func exportable(errs *prometheus.CounterVec, key string) bool {
	if utf8.ValidString(key) {
		return true
	}
	errs.WithLabelValues(exportInvalidUTF8).Inc()
	return false
}

func newExportCollector(s *Server) *exportCollector {
	return &exportCollector{
		s:       s,
		base:    newExportDescs(nil),
		skipped: prometheus.NewDesc("slide_window_export_skipped_series", "Series not exported at this scrape because of the export cap.", nil, nil),
	}
}

func (c *exportCollector) Describe(ch chan<- *prometheus.Desc) {
	b := c.base
	for _, d := range []*prometheus.Desc{b.summary, b.avg, b.min, b.max, b.rate, c.skipped} {
		ch <- d
	}
	c.s.exportErrors.Describe(ch)
}

func (c *exportCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.now()
	budget := c.s.cfg.ExportMaxSeries
	skipped := 0
	keys := make([][]string, len(c.s.cfg.Export))
	for i, e := range c.s.cfg.Export {
		keys[i] = c.s.store.Keys(e.Metric, "")
	}
	labelled := descCache[exportDescs]{make: newExportDescs}
	var values []string
	var labels [][2]string
	for i, e := range c.s.cfg.Export {
		qs := e.quantiles()
		win := window.FormatDuration(e.Window)
		summary := false
		for _, sel := range e.aggs {
			summary = summary || sel.Kind == window.StatCount || sel.Kind == window.StatSum || sel.Kind == window.StatQuantile
		}
		for _, series := range keys[i] {
			if budget == 0 {
				skipped++
				continue
			}
			key, _ := exportKey(series)
			if !exportable(c.s.exportErrors, key) {
				continue
			}
			descs := c.base
			values = append(values[:0], e.Metric, key, win)
			if labels = seriesLabels(labels[:0], series); len(labels) > 0 {
				descs = labelled.get(labels)
				for _, l := range labels {
					values = append(values, l[1])
				}
			}
			a, err := c.s.store.ReadAt(now, e.Metric, series, e.Window, qs)
			if err != nil {
				continue // evicted since Keys; the window was checked by New
			}
			budget--
			// Built first and sent together, so a series is exported whole or not at all.
			var out [6]prometheus.Metric
			ms := out[:0]
			if summary {
				quantiles := make(map[float64]float64, len(qs))
				for i, q := range qs {
					if v := a.Quantile(i, q); v == v { // NaN: nothing to say about an empty window
						quantiles[q] = v
					}
				}
				m, err := prometheus.NewConstSummary(descs.summary, a.Count, a.Sum, quantiles, values...)
				if err != nil {
					c.s.exportErrors.WithLabelValues(exportInvalidMetric).Inc()
					continue
				}
				ms = append(ms, m)
			}
			failed := false
			for _, sel := range e.aggs {
				var desc *prometheus.Desc
				switch sel.Kind {
				case window.StatAvg:
					desc = descs.avg
				case window.StatMin:
					desc = descs.min
				case window.StatMax:
					desc = descs.max
				case window.StatRate:
					desc = descs.rate
				default:
					continue // in the summary
				}
				if v := sel.Value(a, now, 0); v == v {
					m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, v, values...)
					if err != nil {
						failed = true
						break
					}
					ms = append(ms, m)
				}
			}
			if failed {
				c.s.exportErrors.WithLabelValues(exportInvalidMetric).Inc()
				continue
			}
			for _, m := range ms {
				ch <- m
			}
		}
	}
	if c.s.hist != nil {
		skipped += c.s.hist.skipped(budget) // histograms take what the windows left
	}
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.GaugeValue, float64(skipped))
	c.s.exportErrors.Collect(ch)
}

// promLogger sends promhttp's errors to slog. promhttp logs a failed write once for every
// metric family left to send, so a scraper that goes away mid-scrape (its timeout, a
// restart) made a hundred warnings; sending errors are logged at most once in 10 s, and at
// debug when the scraper closed the connection, which is no fault of slide's.
type promLogger struct {
	log  *slog.Logger
	sent *rate.Limiter
}

func newPromLogger(log *slog.Logger) promLogger {
	return promLogger{log: log, sent: rate.NewLimiter(rate.Every(10*time.Second), 1)}
}

func (l promLogger) Println(v ...any) {
	msg := fmt.Sprint(v...)
	// client_golang's words for an error writing a family (promhttp.HandlerFor).
	if !strings.HasPrefix(msg, "error encoding and sending") {
		l.log.Warn("serving metrics", "err", msg)
		return
	}
	if !l.sent.Allow() {
		return
	}
	for _, a := range v {
		if err, ok := a.(error); ok && scraperGone(err) {
			l.log.Debug("serving metrics: the scraper closed the connection mid-scrape (further such errors within 10s are not logged)", "err", err)
			return
		}
	}
	l.log.Warn("serving metrics (further sending errors within 10s are not logged)", "err", msg)
}

// scraperGone reports whether err is a write to a connection the scraper closed.
func scraperGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}
