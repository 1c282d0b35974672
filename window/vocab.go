package window

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slide-metrics/slide/textparse"
)

// This file is the window's vocabulary as other packages speak it: the statistic a caller
// selects from an Agg (the query API's by= and export specs, usage rules), how a window
// length is checked against a ring, the span a read covers, and the slot arithmetic. The
// ring's own checks (slotsFor, span) are in ring.go; the functions here agree with them.

// FloorDiv is floor(a / b) for b > 0, correct for negative a: the index of the slot (or
// fixed window) of width b holding instant a.
func FloorDiv(a, b int64) int64 { return floorDiv(a, b) }

// StatKind names a family of statistics of a window.
type StatKind uint8

// The statistics, named as the API and the policy file write them. The zero value is no
// statistic (an unset field), so a zero Stat is invalid rather than silently "count".
const (
	StatCount    StatKind = iota + 1 // events (weights summed) in the window
	StatSum                          // sum of the values
	StatAvg                          // sum / count
	StatMin                          // smallest value, exact
	StatMax                          // largest value, exact
	StatRate                         // events per second of the elapsed window
	StatQuantile                     // a quantile Q, within the sketch's accuracy
	statEnd                          // one past the last kind: a new statistic goes before it
)

var statNames = [...]string{StatCount: "count", StatSum: "sum", StatAvg: "avg", StatMin: "min", StatMax: "max", StatRate: "rate", statEnd: ""}

// StatNames lists the statistics ParseStat reads by name, as messages and help list them:
// "count, sum, avg, min, max, rate" (quantiles are written p95 or 0.95).
var StatNames = func() string {
	var b strings.Builder
	for _, n := range statNames {
		if n != "" {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(n)
		}
	}
	return b.String()
}()

// Stat selects one number of a window's Agg: count, sum, avg, min, max, rate (per second)
// or the quantile Q.
type Stat struct {
	Kind StatKind
	Q    float64 // the quantile of StatQuantile, in [0, 1]
}

// ParseStat reads count|sum|avg|min|max|rate (any case, spaces around allowed), a
// percentile (p95, p99.9, p999) or a quantile written as a fraction (0.95).
func ParseStat(s string) (Stat, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	for k, n := range statNames {
		if n != "" && n == s {
			return Stat{Kind: StatKind(k)}, true
		}
	}
	if q, ok := ParseQuantile(s); ok {
		return Stat{Kind: StatQuantile, Q: q}, true
	}
	return Stat{}, false
}

// Valid reports a Stat ParseStat could have returned.
func (s Stat) Valid() bool {
	switch {
	case s.Kind == 0 || s.Kind >= statEnd:
		return false
	case s.Kind == StatQuantile:
		return s.Q >= 0 && s.Q <= 1
	}
	return true
}

// String is the name ParseStat reads, quantiles as percentiles: "sum", "p95", "p99.9".
func (s Stat) String() string {
	if s.Kind == StatQuantile {
		return FormatPercentile(s.Q)
	}
	if int(s.Kind) < len(statNames) && statNames[s.Kind] != "" {
		return statNames[s.Kind]
	}
	return fmt.Sprintf("StatKind(%d)", s.Kind)
}

// Value is the selected number of a, read at now; qi is the index of the Stat's quantile in
// a.Quantiles. It is NaN where the window has none (an empty window's avg, min, max or
// quantile). Quantiles 0 and 1 are the exact Min and Max, which the aggregate knows better
// than the sketch.
func (s Stat) Value(a Agg, now int64, qi int) float64 {
	switch s.Kind {
	case StatCount:
		return float64(a.Count)
	case StatSum:
		return a.Sum
	case StatAvg:
		return a.Avg()
	case StatMin, StatMax:
		if a.Count == 0 {
			return math.NaN()
		}
		if s.Kind == StatMin {
			return a.Min
		}
		return a.Max
	case StatRate:
		return a.RatePerSec(now)
	}
	return a.Quantile(qi, s.Q)
}

// Quantile is the i-th quantile of a, asked as q: NaN for an empty window (or an i a.Quantiles
// does not hold), and the exact Min and Max for q = 0 and q = 1.
func (a Agg) Quantile(i int, q float64) float64 {
	switch {
	case a.Count == 0 || i < 0 || i >= len(a.Quantiles):
		return math.NaN()
	case q == 0:
		return a.Min
	case q == 1:
		return a.Max
	}
	return a.Quantiles[i]
}

// ParseQuantile reads a quantile written as a fraction in [0, 1] ("0.95") or as a
// percentile ("p95", "P95", "p99.9", "p999" = 0.999, "p5" = 0.05, "p100" = 1).
func ParseQuantile(s string) (float64, bool) {
	if len(s) > 1 && (s[0] == 'p' || s[0] == 'P') {
		return parsePercentile(s[1:])
	}
	q, err := strconv.ParseFloat(s, 64)
	if err != nil || !(q >= 0 && q <= 1) {
		return 0, false
	}
	return q, true
}

// parsePercentile turns "95" into 0.95 by moving the decimal point in the text, so the
// result is exactly the float literal (99.9/100 is not always 0.999). Without a point,
// one digit is a single-digit percent (p5 = 0.05), two are a percent (p95), "100" is 1,
// and three or more are the digits after "0." as usual for tail latencies (p999 = 0.999,
// p9999 = 0.9999).
func parsePercentile(s string) (float64, bool) {
	intPart, frac, point := strings.Cut(s, ".")
	if intPart == "" || len(s) > 12 || (point && frac == "") || !allDigits(intPart) || !allDigits(frac) {
		return 0, false
	}
	var text string
	switch {
	case point && len(intPart) <= 2:
		text = "0." + strings.Repeat("0", 2-len(intPart)) + intPart + frac
	case point:
		if intPart != "100" || strings.Trim(frac, "0") != "" {
			return 0, false
		}
		return 1, true
	case len(intPart) == 1:
		text = "0.0" + intPart
	case intPart == "100":
		return 1, true
	default:
		text = "0." + intPart
	}
	q, err := strconv.ParseFloat(text, 64)
	return q, err == nil && q <= 1
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatPercentile writes q as ParseQuantile reads it, moving the point in text (q×100 is
// not always exact in floating point): 0.95 → p95, 0.999 → p99.9, 0.05 → p5, 1 → p100.
func FormatPercentile(q float64) string {
	switch {
	case q == 1:
		return "p100"
	case q == 0:
		return "p0"
	}
	t := strconv.FormatFloat(q, 'f', -1, 64) // "0.95"
	d := t[2:]
	for len(d) < 2 {
		d += "0"
	}
	ip, frac := strings.TrimLeft(d[:2], "0"), d[2:]
	if ip == "" {
		ip = "0"
	}
	if frac == "" {
		return "p" + ip
	}
	return "p" + ip + "." + frac
}

// windowError is a window length a ring cannot read; it matches ErrBadWindow.
type windowError struct{ msg string }

func (e *windowError) Error() string { return e.msg }
func (e *windowError) Unwrap() error { return ErrBadWindow }

// ParseDuration reads a length of time as windows are written: Go's duration syntax (90s, 5m,
// 1h30m, 1.5h, 300ms, a sign allowed) and whole days with the unit d (1d = 24h, 7d, 1d12h),
// which Go's lacks. It checks the spelling alone: zero and negative lengths parse, for the
// few places where 0 means "none" (slide batch --span); everything else wants ParseWindow.
// The error matches ErrBadWindow and quotes s, clipped (textparse.Clip):
// "\"an hour\" is not a duration such as 90s, 5m, 1h or 7d".
//
// This is the one parser of window lengths (the query API's window= and step=, export specs,
// usage rules, rls limits, policy files, slide's --slot, --rings and --span), so a unit or a
// kind of window added here is added everywhere.
func ParseDuration(s string) (time.Duration, error) {
	if d, ok := parseLength(s); ok {
		return d, nil
	}
	return 0, &windowError{strconv.Quote(textparse.Clip(s)) + " is not a duration such as 90s, 5m, 1h or 7d"}
}

// ParseWindow is ParseDuration for a window: the length must also be positive ("0s must be
// positive", in CheckWindow's words, naming s as written). Whether a metric's ring can read
// it is CheckWindow's question.
func ParseWindow(s string) (time.Duration, error) {
	d, err := ParseDuration(s)
	if err == nil && d <= 0 {
		return 0, &windowError{textparse.Clip(s) + " must be positive"}
	}
	return d, err
}

// maxDays is the most days a time.Duration holds.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

// parseLength is ParseDuration's syntax: an optional sign, then whole days ("7d") followed by
// an unsigned Go duration or nothing, or else a Go duration alone.
func parseLength(s string) (time.Duration, bool) {
	t, neg := s, false
	if t != "" && (t[0] == '-' || t[0] == '+') {
		t, neg = t[1:], t[0] == '-'
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 || i == len(t) || t[i] != 'd' {
		d, err := time.ParseDuration(s)
		return d, err == nil
	}
	days, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || days > maxDays {
		return 0, false
	}
	d := time.Duration(days) * 24 * time.Hour
	if rest := t[i+1:]; rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || rest[0] == '-' || rest[0] == '+' || r > math.MaxInt64-d {
			return 0, false
		}
		d += r
	}
	if neg {
		d = -d
	}
	return d, true
}

// CheckWindow reports whether a ring of config c (the config of metric) can read a window
// of length w: positive, a multiple of the slot width, at most the retention (the rule the
// ring's reads apply). The error matches ErrBadWindow and reads as a message for an HTTP
// client or an operator: "15s is not a multiple of the slot width 10s of metric
// \"latency_ms\"". It names the window as text, the caller's spelling (clipped by the
// caller if it is a client's), or FormatDuration(w) when text is empty.
func (c RingConfig) CheckWindow(w time.Duration, text, metric string) error {
	d := c.withDefaults()
	if text == "" {
		text = FormatDuration(w)
	}
	switch {
	case w <= 0:
		return &windowError{text + " must be positive"}
	case w > d.Reach() && len(d.Tiers) > 0:
		return &windowError{fmt.Sprintf("%s is longer than the reach %s of metric %q (rings %s)", text, FormatDuration(d.Reach()), metric, d.Spec())}
	case w > d.Retention() && len(d.Tiers) == 0:
		return &windowError{fmt.Sprintf("%s is longer than the retention %s of metric %q", text, FormatDuration(d.Retention()), metric)}
	case w%d.Slot != 0:
		return &windowError{fmt.Sprintf("%s is not a multiple of the slot width %s of metric %q", text, FormatDuration(d.Slot), metric)}
	}
	return nil
}

// Span is the span [from, to) in Unix ms that a read of window w at now covers with a ring
// of config c: the current slot and the w/slot − 1 before it, as Agg.From and Agg.To state
// it. It is what a read of a series would answer, for answers that have no series. w is
// assumed valid (CheckWindow). A window past the retention of a tiered ring starts where a
// read starts it before rounding: a series' read may round it out to a tier slot (Agg.From).
func (c RingConfig) Span(now int64, w time.Duration) (from, to int64) {
	width := c.withDefaults().Slot.Milliseconds()
	cur := floorDiv(now, width)
	k := w.Milliseconds() / width
	return (cur - k + 1) * width, (cur + 1) * width
}

// FormatDuration writes d in its largest whole unit: 5m, 1h, 90s, 1500ms, as users type
// windows (time.Duration.String would say 5m0s).
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}
