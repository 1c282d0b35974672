package batch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Result is the best window of a run. It marshals to the one-line JSON that slide batch prints:
//
//	{"agg":"sum","size":1000,"n":100000,"best":500500,"start":0,"end":999}
//	{"agg":"max","span_ms":60000,"n":100000,"best":1000,"start":3,"end":88,"start_ts":…,"end_ts":…}
//
// Start and End are the 0-based, inclusive data-row indices of the best window (the header is
// not a row); StartTS and EndTS (time windows only) are the timestamps of those two rows, in
// unix ms.
//
// RunAll fills in more, which marshals after those fields (so the line above only grows):
// start_line and end_line (1-based file lines of the two rows; for Parquet their 1-based row
// numbers), start_id and end_id (Job.IDColumn), start_time and end_time (time windows: RFC
// 3339 in UTC, millisecond precision), and "group" first (Job.GroupBy). A group with fewer rows
// than a count window has "best":null and "error" instead of a window.
type Result struct {
	Agg     string
	Size    int           // count window, 0 for a time window
	Span    time.Duration // time window, 0 for a count window
	N       int64         // data rows read (of the group, with GroupBy)
	Best    float64
	Start   int64
	End     int64
	StartTS int64
	EndTS   int64

	StartLine, EndLine int64 // file lines of rows Start and End; 0 when unknown
	StartID, EndID     string
	HasID              bool // StartID/EndID are set (Job.IDColumn)
	Group              string
	HasGroup           bool // the job had a GroupBy
	TooFew             bool // the group has fewer rows than the count window: no window
}

// MarshalJSON writes the fields in the documented order, size or span_ms by window kind.
func (r Result) MarshalJSON() ([]byte, error) {
	type countJSON struct {
		Agg   string  `json:"agg"`
		Size  int     `json:"size"`
		N     int64   `json:"n"`
		Best  float64 `json:"best"`
		Start int64   `json:"start"`
		End   int64   `json:"end"`
	}
	type timeJSON struct {
		Agg     string  `json:"agg"`
		SpanMS  int64   `json:"span_ms"`
		N       int64   `json:"n"`
		Best    float64 `json:"best"`
		Start   int64   `json:"start"`
		End     int64   `json:"end"`
		StartTS int64   `json:"start_ts"`
		EndTS   int64   `json:"end_ts"`
	}
	if !r.HasGroup && !r.HasID && r.StartLine == 0 && !r.TooFew {
		if r.Span > 0 {
			return json.Marshal(timeJSON{r.Agg, r.Span.Milliseconds(), r.N, r.Best, r.Start, r.End, r.StartTS, r.EndTS})
		}
		return json.Marshal(countJSON{r.Agg, r.Size, r.N, r.Best, r.Start, r.End})
	}
	// The fields in order, by hand: which ones appear depends on the job.
	b := []byte{'{'}
	field := func(name string, v any) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, name)
		b = append(b, ':')
		enc, _ := json.Marshal(v)
		b = append(b, enc...)
	}
	if r.HasGroup {
		field("group", r.Group)
	}
	field("agg", r.Agg)
	if r.Span > 0 {
		field("span_ms", r.Span.Milliseconds())
	} else {
		field("size", r.Size)
	}
	field("n", r.N)
	if r.TooFew {
		field("best", nil)
		field("error", ErrTooFewRows.Error())
		return append(b, '}'), nil
	}
	if !finite(r.Best) {
		return nil, fmt.Errorf("batch: best %v is not a JSON number", r.Best)
	}
	field("best", r.Best)
	field("start", r.Start)
	field("end", r.End)
	if r.Span > 0 {
		field("start_ts", r.StartTS)
		field("end_ts", r.EndTS)
	}
	if r.StartLine > 0 {
		field("start_line", r.StartLine)
		field("end_line", r.EndLine)
	}
	if r.HasID {
		field("start_id", r.StartID)
		field("end_id", r.EndID)
	}
	if r.Span > 0 {
		field("start_time", FormatTime(r.StartTS))
		field("end_time", FormatTime(r.EndTS))
	}
	return append(b, '}'), nil
}

// FormatTime writes unix milliseconds as RFC 3339 in UTC with millisecond precision.
func FormatTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// appendTime appends FormatTime(ms) to b.
func appendTime(b []byte, ms int64) []byte {
	return time.UnixMilli(ms).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
}
