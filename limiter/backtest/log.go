package backtest

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/slide-metrics/slide/textparse"
)

// ErrLog wraps every error of a request log that is about its content (the line is named).
var ErrLog = errors.New("bad request log")

// maxLogLine bounds one line of a request log.
const maxLogLine = 1 << 20

// ReadLog reads a request log and calls fn for each request, in file order: NDJSON (one
// object per line) when the first non-blank byte is '{', else CSV with a header row. The
// fields are ts (unix milliseconds or RFC 3339), key, and optionally cost (default 1) and
// policy. A line with a metric (and value) is a metric event ({"ts","key","metric","value"},
// as POST /v1/events takes them), which usage rules read. Other fields are ignored. Blank lines are skipped; a bad line is an error wrapping ErrLog that names it.
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
			return readNDJSON(br, fn)
		}
		return readCSV(br, fn)
	}
}

func readNDJSON(r io.Reader, fn func(Request) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLogLine)
	var line int64
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var obj struct {
			TS     json.RawMessage `json:"ts"`
			Key    *string         `json:"key"`
			Cost   *int64          `json:"cost"`
			Policy string          `json:"policy"`
			Metric string          `json:"metric"`
			Value  *float64        `json:"value"`
		}
		if err := json.Unmarshal(text, &obj); err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrLog, line, err)
		}
		if obj.Key == nil {
			return fmt.Errorf("%w: line %d: no \"key\"", ErrLog, line)
		}
		ts := bytes.Trim(obj.TS, `"`)
		req, err := request(line, ts, *obj.Key, obj.Cost, obj.Policy)
		if err != nil {
			return err
		}
		if obj.Metric != "" {
			if obj.Value == nil {
				return fmt.Errorf("%w: line %d: a metric event without \"value\"", ErrLog, line)
			}
			req.Metric, req.Value = obj.Metric, *obj.Value
		}
		if err := fn(req); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: line %d: longer than %d bytes", ErrLog, line+1, maxLogLine)
		}
		return err
	}
	return nil
}

func readCSV(r io.Reader, fn func(Request) error) error {
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
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrLog, err)
		}
		var cost *int64
		if hasCost && strings.TrimSpace(rec[icost]) != "" {
			c, err := strconv.ParseInt(strings.TrimSpace(rec[icost]), 10, 64)
			if err != nil {
				return fmt.Errorf("%w: line %d: cost %q is not an integer", ErrLog, line, rec[icost])
			}
			cost = &c
		}
		pol := ""
		if hasPol {
			pol = strings.TrimSpace(rec[ipol])
		}
		req, err := request(int64(line), []byte(strings.TrimSpace(rec[its])), rec[ikey], cost, pol)
		if err != nil {
			return err
		}
		if hasMetric && strings.TrimSpace(rec[imetric]) != "" {
			if !hasValue {
				return fmt.Errorf("%w: line %d: a metric event needs a value column", ErrLog, line)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[ivalue]), 64)
			if err != nil {
				return fmt.Errorf("%w: line %d: value %q is not a number", ErrLog, line, rec[ivalue])
			}
			req.Metric, req.Value = strings.TrimSpace(rec[imetric]), v
		}
		if err := fn(req); err != nil {
			return err
		}
	}
}

func request(line int64, ts []byte, key string, cost *int64, policy string) (Request, error) {
	ms, err := textparse.ParseTime(ts)
	if err != nil {
		return Request{}, fmt.Errorf("%w: line %d: ts %q: %v", ErrLog, line, ts, err)
	}
	if ms < -(1<<53) || ms > 1<<53 {
		return Request{}, fmt.Errorf("%w: line %d: ts %q out of range", ErrLog, line, ts)
	}
	req := Request{Time: time.UnixMilli(ms), Key: key, Cost: 1, Policy: policy, Line: line}
	if cost != nil {
		if *cost < 0 {
			return Request{}, fmt.Errorf("%w: line %d: cost %d is negative", ErrLog, line, *cost)
		}
		req.Cost = *cost
	}
	return req, nil
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
