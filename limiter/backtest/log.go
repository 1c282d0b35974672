package backtest

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/textparse"
)

// ErrLog wraps every error of a request log that is about its content (the line is named).
var ErrLog = errors.New("bad request log")

// maxLogLine bounds one line of a request log.
const maxLogLine = 1 << 20

// ReadLog reads a request log and calls fn for each request, in file order: NDJSON (one
// object per line) when the first non-blank byte is '{', else CSV with a header row. A
// request has ts and key, and optionally cost (default 1; 0 peeks, as POST /v1/allow takes
// it) and policy. A line with a metric is a metric event (as POST /v1/events takes it: key,
// metric, value, optional count), which usage rules read. Other fields are ignored.
//
// The fields follow the rules of events (package event), the same at every door: a metric
// event is decoded by event.Decoder itself and refused as it would refuse it; a request's ts
// is unix milliseconds as a JSON integer or RFC 3339 as a JSON string ("1764489600123", a
// string of digits, is refused, as ingest refuses it), its key a window.ValidName of at most
// limiter.MaxKeyLen bytes, never rewritten to U+FFFD, and its cost an integer read as an
// event's count is. CSV fields are text, so there ts is either form as text (as slide batch
// reads it), and the key, a metric event's metric and value and its count hold to the same
// rules. Blank lines are skipped; a bad line is an error wrapping ErrLog that names it and
// why.
func ReadLog(r io.Reader, fn func(Request) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		b, err := br.Peek(1)
		if err != nil {
			if err == io.EOF {
				return nil // empty log
			}
			return err
		}
		if c := b[0]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			br.ReadByte()
			continue
		}
		if b[0] == '{' {
			return newLineReader().readNDJSON(br, fn)
		}
		if b[0] == '[' { // no CSV header starts so; Zipkin's span lists do
			if first, _ := br.Peek(min(br.Buffered(), 4096)); event.FormatOf(first) == "zipkin_json" {
				return lineErr(1, "a JSON list, not a request log%s", otherShape(first))
			}
		}
		return newLineReader().readCSV(br, fn)
	}
}

// The members of a request-log line that are read; others are validated and skipped.
const (
	lTS = iota
	lKey
	lCost
	lPolicy
	lMetric
	numLogFields
)

var logFields = []string{"ts", "key", "cost", "policy", "metric"}

// lineReader reads the lines of a request log by the rules of events: event.Decoder's
// decoding, and its field readers for what a request carries besides.
type lineReader struct {
	dec  *event.Decoder
	sc   textparse.Scanner
	vals [numLogFields + 1]textparse.Value // by l*; the last: members not read
	buf  []byte                            // an unquoted policy
}

func newLineReader() *lineReader {
	dec, _ := event.NewDecoder(event.Config{MaxKeyLen: limiter.MaxKeyLen}) // a valid config
	lr := &lineReader{dec: dec, sc: textparse.Scanner{AllowNaN: true}}     // NaN as a value: the decoder names it
	lr.sc.SetNames(logFields...)
	return lr
}

// lineErr is a request log's error at line.
func lineErr(line int64, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: "+format, append([]any{ErrLog, line}, args...)...)
}

func (lr *lineReader) readNDJSON(r io.Reader, fn func(Request) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLogLine)
	var line int64
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		req, err := lr.ndjson(line, text)
		if err != nil {
			return err
		}
		if err := fn(req); err != nil {
			return err
		}
	}
	return scanErr(sc, line)
}

// otherShape is what a refusal of text adds when text is spans or logs that a flag of
// slide backtest reads, else "".
func otherShape(text []byte) string {
	switch f := event.FormatOf(text); f {
	case "otlp_json", "zipkin_json":
		return " (spans? replay them with --event-format " + f + ")"
	case "otlp_logs_json":
		return " (OTLP logs? replay the access log's JSON lines themselves with --event-map)"
	}
	return ""
}

// ndjson reads one line of an NDJSON log.
func (lr *lineReader) ndjson(line int64, text []byte) (Request, error) {
	v := &lr.vals
	*v = [numLogFields + 1]textparse.Value{}
	sc := &lr.sc
	sc.Reset(text)
	sc.Into(v[:])
	nan := false
	for sc.Next() {
		nan = nan || sc.Value.Kind == textparse.NaN
	}
	if !sc.Done() {
		return Request{}, lineErr(line, "%s: %v%s", event.ReasonInvalidJSON, sc.Err(), otherShape(text))
	}
	if m := v[lMetric]; !absent(m) && !(m.Kind == textparse.String && m.End == m.Start) {
		return lr.metricEvent(line, text) // a metric event, the decoder's
	}
	if nan {
		return Request{}, lineErr(line, "%s: NaN or Infinity is not JSON", event.ReasonInvalidJSON)
	}
	if absent(v[lTS]) {
		hint := otherShape(text)
		if hint == "" && absent(v[lKey]) {
			hint = " (an access log? --event-map reads it)"
		}
		return Request{}, lineErr(line, `no "ts"%s`, hint)
	}
	ms, r := lr.dec.TS(text, v[lTS], 0)
	if r != event.ReasonNone {
		return Request{}, lineErr(line, "ts %s: %s (%s)", lr.shown(text, v[lTS]), r, tsRule)
	}
	if absent(v[lKey]) {
		return Request{}, lineErr(line, `no "key"`)
	}
	key, r := lr.dec.Name(text, v[lKey])
	if r != event.ReasonNone {
		return Request{}, lineErr(line, "key %s: %s (%s)", lr.shown(text, v[lKey]), r, keyRule)
	}
	cost := int64(1)
	switch c := v[lCost]; c.Kind {
	case textparse.Absent, textparse.Null:
	case textparse.Number:
		cost = costOf(c.Bytes(text))
	default:
		cost = -1
	}
	if cost < 0 {
		return Request{}, lineErr(line, "cost %s is %s", lr.shown(text, v[lCost]), costRule)
	}
	policy := ""
	switch p := v[lPolicy]; p.Kind {
	case textparse.Absent, textparse.Null:
	case textparse.String:
		lr.buf, _ = textparse.Unquote(lr.buf[:0], p.Bytes(text))
		policy = string(lr.buf)
	default:
		return Request{}, lineErr(line, "policy %s is not a string", lr.shown(text, p))
	}
	return request(line, ms, v[lTS].Bytes(text), key, cost, policy)
}

// absent reports a member that is not there or null, as the event's fields read them.
func absent(v textparse.Value) bool { return v.Kind == textparse.Absent || v.Kind == textparse.Null }

// shown is a member's value of text as an error quotes it, clipped: a string unescaped and
// Go-quoted (a NUL shows as \x00), unless unescaping would rewrite it to U+FFFD: then a raw
// byte shows as \xff and an escaped lone surrogate as the log wrote it; anything else as
// written.
func (lr *lineReader) shown(text []byte, v textparse.Value) string {
	raw := v.Bytes(text)
	if v.Kind != textparse.String {
		return textparse.Clip(string(raw))
	}
	var lossy bool
	lr.buf, lossy = textparse.Unquote(lr.buf[:0], raw)
	switch {
	case lossy && !utf8.Valid(raw):
		return strconv.Quote(textparse.Clip(string(raw)))
	case lossy:
		return `"` + textparse.Clip(string(raw)) + `"`
	}
	return strconv.Quote(textparse.Clip(string(lr.buf)))
}

// metricEvent decodes a line with a metric as event.Decoder decodes a Kafka record's, with
// its refusals. Its ts is required: a log has no record time to default to.
func (lr *lineReader) metricEvent(line int64, text []byte) (Request, error) {
	if absent(lr.vals[lTS]) {
		return Request{}, lineErr(line, `a metric event without "ts"`)
	}
	ev, r := lr.dec.Decode(text, 0)
	if r != event.ReasonNone {
		return Request{}, lineErr(line, "metric event refused: %s", r)
	}
	req, err := request(line, ev.TS, lr.vals[lTS].Bytes(text), ev.Key, 1, "")
	req.Metric, req.Value, req.Count = ev.Metric, ev.Value, ev.Count
	return req, err
}

// What the request fields' errors say the rule is.
const (
	tsRule   = "unix milliseconds as a JSON integer, or RFC 3339 as a JSON string, as events"
	costRule = "not an integer ≥ 0"
)

var keyRule = fmt.Sprintf("the key rule of events: 1 to %d bytes of UTF-8 without control characters", limiter.MaxKeyLen)

// costOf reads a cost, an integer written as an event's count is (digits, no sign), where 0
// peeks as /v1/allow takes it; −1 for anything else.
func costOf(b []byte) int64 {
	n, ok := textparse.ParseUint(b)
	if !ok || n > math.MaxInt64 {
		return -1
	}
	return int64(n)
}

func (lr *lineReader) readCSV(r io.Reader, fn func(Request) error) error {
	cr := csv.NewReader(&recordLimit{r: r, line: 1})
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%w: header: %v", ErrLog, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	its, okT := col["ts"]
	ikey, okK := col["key"]
	if !okT || !okK {
		return fmt.Errorf("%w: the header needs ts and key columns (has %s)", ErrLog, strings.Join(header, ","))
	}
	icost, hasCost := col["cost"]
	ipol, hasPol := col["policy"]
	imetric, hasMetric := col["metric"]
	ivalue, hasValue := col["value"]
	icount, hasCount := col["count"]
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		l, _ := cr.FieldPos(0)
		line := int64(l)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrLog, err)
		}
		ts := []byte(strings.TrimSpace(rec[its]))
		ms, err := textparse.ParseTime(ts)
		if err != nil {
			return lineErr(line, "ts %q: %v", ts, err)
		}
		if r := lr.dec.CheckName(rec[ikey]); r != event.ReasonNone {
			return lineErr(line, "key %q: %s (%s)", textparse.Clip(rec[ikey]), r, keyRule)
		}
		cost := int64(1)
		if hasCost && strings.TrimSpace(rec[icost]) != "" {
			if cost = costOf([]byte(strings.TrimSpace(rec[icost]))); cost < 0 {
				return lineErr(line, "cost %q is %s", rec[icost], costRule)
			}
		}
		pol := ""
		if hasPol {
			pol = strings.TrimSpace(rec[ipol])
		}
		req, err := request(line, ms, ts, rec[ikey], cost, pol)
		if err != nil {
			return err
		}
		if hasMetric && strings.TrimSpace(rec[imetric]) != "" {
			metric := strings.TrimSpace(rec[imetric])
			if r := lr.dec.CheckName(metric); r != event.ReasonNone {
				return lineErr(line, "metric %q: %s (%s)", textparse.Clip(metric), r, keyRule)
			}
			if !hasValue {
				return lineErr(line, "a metric event needs a value column")
			}
			v, err := textparse.ParseFloat([]byte(strings.TrimSpace(rec[ivalue])))
			if err != nil {
				return lineErr(line, "value %q is not a number", rec[ivalue])
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return lineErr(line, "value %q: %s", rec[ivalue], event.ReasonInvalidValue)
			}
			req.Metric, req.Value, req.Count = metric, v, 1
			if hasCount && strings.TrimSpace(rec[icount]) != "" {
				n, ok := textparse.ParseUint([]byte(strings.TrimSpace(rec[icount])))
				if !ok || n == 0 {
					return lineErr(line, "count %q: %s (an integer ≥ 1)", rec[icount], event.ReasonBadField)
				}
				req.Count = n
			}
		}
		if err := fn(req); err != nil {
			return err
		}
	}
}

// request is the request of line at ms (written ts in the log), within the ±2^53 ms the
// replay's time.Time arithmetic keeps exact.
func request(line int64, ms int64, ts []byte, key string, cost int64, policy string) (Request, error) {
	if ms < -(1<<53) || ms > 1<<53 {
		return Request{}, lineErr(line, "ts %q out of range", ts)
	}
	return Request{Time: time.UnixMilli(ms), Key: key, Cost: cost, Policy: policy, Line: line}, nil
}

// recordLimit is r, failing once a CSV record (the bytes up to a newline outside quotes) is
// maxLogLine long: encoding/csv has no such bound and would buffer a whole record, however
// long, before looking at it. In the RFC 4180 that encoding/csv reads without LazyQuotes,
// quotes only open, close and double inside quoted fields, so their parity says whether a
// newline ends the record (a bare quote is encoding/csv's error, at that line).
type recordLimit struct {
	r      io.Reader
	n      int   // bytes of the current record so far
	line   int64 // line where the current record starts
	lines  int64 // newlines inside the current record
	quoted bool
}

// errRecordTooLong is recordLimit's error; readCSV names the line.
var errRecordTooLong = fmt.Errorf("longer than %d bytes", maxLogLine)

func (l *recordLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexAny(p[i:n], "\"\n")
		if j < 0 {
			j = n - i
		}
		if l.n+j >= maxLogLine {
			return i + j, fmt.Errorf("line %d: %w", l.line, errRecordTooLong)
		}
		l.n += j
		i += j
		if i == n {
			break
		}
		switch p[i] {
		case '"':
			l.quoted = !l.quoted
			l.n++
		case '\n':
			if l.quoted {
				l.n++
				l.lines++
			} else {
				l.line += l.lines + 1
				l.n, l.lines = 0, 0
			}
		}
		i++
	}
	return n, err
}

// scanErr is a log scanner's error after line lines: a line past maxLogLine named by its
// number, else the reader's error, or nil.
func scanErr(sc *bufio.Scanner, line int64) error {
	err := sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		return lineErr(line+1, "longer than %d bytes", maxLogLine)
	}
	return err
}
