package query

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// paramError is a bad request parameter. Its message names the parameter; the API answers
// it with 400 and code bad_parameter.
type paramError struct {
	name, msg string
}

func (e *paramError) Error() string { return "parameter " + strconv.Quote(e.name) + ": " + e.msg }

func badParam(name, format string, args ...any) *paramError {
	return &paramError{name: name, msg: fmt.Sprintf(format, args...)}
}

// nameParams match series names: their values are held to window.ValidName.
var nameParams = []string{"key", "metric", "prefix"}

// multiParams may be repeated; their values are joined with commas.
var multiParams = []string{"q"}

// parseParams parses a query string and refuses parameters a route does not know (a typo
// such as "windw" would otherwise be silently ignored) and repeated single-valued ones.
func parseParams(raw string, allowed ...string) (url.Values, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, &paramError{name: "query", msg: "malformed query string: " + err.Error()}
	}
	var unknown []string
	for name, vals := range v {
		switch {
		case !slices.Contains(allowed, name):
			unknown = append(unknown, name)
		case len(vals) > 1 && !slices.Contains(multiParams, name):
			return nil, badParam(name, "given %d times, want once", len(vals))
		}
		// Keys are bytes: a value that is not UTF-8 ("t%FF") names no series (the ingest
		// decoder refuses such keys), and answering 404 would hide the client's mistake.
		for _, s := range vals {
			if !slices.Contains(allowed, name) {
				continue
			}
			if !utf8.ValidString(s) {
				return nil, badParam(name, "not valid UTF-8 (keys and metrics are UTF-8 text)")
			}
			// A key, metric or prefix no door admits (window.ValidName) names no series either.
			if s != "" && slices.Contains(nameParams, name) && !window.ValidName(s) {
				return nil, badParam(name, "holds a control character or a bidi override (keys and metrics are printable UTF-8)")
			}
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		// The client's text: valid UTF-8, so "param" and the message show the same name
		// (JSON would turn a stray byte into U+FFFD, %q into \xNN), and at most maxEcho bytes.
		name := clip(strings.ToValidUTF8(unknown[0], "\uFFFD"))
		if name == "" { // "?=5": there is no name to report, so the query string is at fault
			return nil, badParam("query", "a parameter has an empty name")
		}
		if len(allowed) == 0 {
			return nil, badParam(name, "unknown parameter (this route takes none)")
		}
		return nil, badParam(name, "unknown parameter (this route takes %s)", strings.Join(allowed, ", "))
	}
	return v, nil
}

// maxEcho bounds how much of a client's value an error message quotes back (textparse's
// one rule for every package that echoes input).
const maxEcho = textparse.MaxEcho

// clip shortens s for an error message: textparse.Clip, at most maxEcho bytes cut at a rune
// boundary, and a note of the length.
func clip(s string) string { return textparse.Clip(s) }

// MaxKeyPatternBytes is the longest glob key (one holding '*') the read routes accept; a
// longer one is 400. Matching costs O(pattern length) per series of the metric, so the cap
// keeps one request from costing length × series. Keys without a star are looked up
// once and are not capped: one no series has is 404. It is 4 × the event decoder's
// default key cap (256 bytes), so every pattern over real keys fits.
const MaxKeyPatternBytes = 1024

// checkKeyPattern refuses a glob key over MaxKeyPatternBytes.
func checkKeyPattern(name, key string) error {
	if len(key) > MaxKeyPatternBytes && window.IsKeyPattern(key) {
		return badParam(name, "key pattern of %d bytes, at most %d", len(key), MaxKeyPatternBytes)
	}
	return nil
}

// required returns the parameter's value or an error naming it.
func required(v url.Values, name string) (string, error) {
	s := v.Get(name)
	if s == "" {
		return "", badParam(name, "required")
	}
	return s, nil
}

// selection is how a series read (/v1/window, /v1/range) chose its series: key= (a key, a
// glob, or "" for any key when match= or by= is given), match= as written, their compiled
// selector, and by= (nil: one answer).
type selection struct {
	key, match string
	ms         []window.Matcher
	sel        *window.Selector
	by         []string
}

// seriesParams reads what the series reads (/v1/window, /v1/range) take first: the query
// string (allowed: the parameters the read takes, as parseParams), partial, then metric,
// key (a name or a glob; required unless match= or by= selects), match= and by=, each error
// naming its parameter.
func seriesParams(raw string, allowed ...string) (v url.Values, metric string, sl selection, allowPartial bool, err error) {
	if v, err = parseParams(raw, allowed...); err != nil {
		return
	}
	if allowPartial, err = parsePartial(v); err != nil {
		return
	}
	if metric, err = required(v, "metric"); err != nil {
		return
	}
	sl.match = v.Get("match")
	if sl.by, err = byParam(v); err != nil {
		return
	}
	if sl.match == "" && sl.by == nil {
		if sl.key, err = required(v, "key"); err != nil {
			return
		}
	} else {
		sl.key = v.Get("key")
	}
	if err = checkKeyPattern("key", sl.key); err != nil {
		return
	}
	sl.sel, sl.ms, err = selectorParam(v, sl.key)
	return
}

// quantilesParam reads q, or def when the request has none.
func quantilesParam(v url.Values, def []float64) ([]float64, error) {
	vals, ok := v["q"]
	if !ok {
		return def, nil
	}
	return parseQuantiles("q", vals)
}

// parseQuantiles reads a comma-separated list of quantiles, dropping duplicates and keeping
// the order given. An empty list is an error: the caller decides the default.
func parseQuantiles(name string, vals []string) ([]float64, error) {
	var qs []float64
	for _, v := range vals {
		for f := range strings.SplitSeq(v, ",") {
			f = strings.TrimSpace(f)
			q, ok := window.ParseQuantile(f)
			if !ok {
				return nil, badParam(name, "%q is not a quantile: want a number in [0, 1] such as 0.95, or a percentile such as p95", clip(f))
			}
			if !slices.Contains(qs, q) {
				qs = append(qs, q)
			}
			// Refuse as soon as the list is too long: the duplicate check is O(len(qs)) per item.
			if len(qs) > maxQuantiles {
				return nil, badParam(name, "more than %d distinct quantiles", maxQuantiles)
			}
		}
	}
	return qs, nil
}

// maxQuantiles bounds the quantiles one request may ask for.
const maxQuantiles = 32

// formatQuantile is the JSON key of quantile q: "0.5", "0.95", "0.999".
func formatQuantile(b []byte, q float64) []byte { return strconv.AppendFloat(b, q, 'g', -1, 64) }

// parseWindow reads a window length such as "5m" or "90s" (window.ParseWindow) and checks it
// against the ring of metric (window.RingConfig.CheckWindow: a multiple of its slot width, at
// most its retention). Empty means the whole retention.
func parseWindow(s string, rc window.RingConfig, metric string) (time.Duration, error) {
	if s == "" {
		return rc.Retention(), nil
	}
	d, err := window.ParseWindow(s)
	if err == nil {
		err = rc.CheckWindow(d, clip(s), metric) // "0000…05m" parses: echo it clipped too
	}
	if err != nil {
		return 0, badParam("window", "%s", err.Error())
	}
	return d, nil
}

// parseInt reads an integer parameter in [lo, hi], def when absent.
func parseInt(v url.Values, name string, def, lo, hi int) (int, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, badParam(name, "%q is not an integer", clip(s))
	}
	if n < lo || n > hi {
		return 0, badParam(name, "%d is outside [%d, %d]", n, lo, hi)
	}
	return n, nil
}
