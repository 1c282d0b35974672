package batch

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Row-level ones arrive wrapped in a *RowError that names the row and column.
var (
	ErrMissingColumn = errors.New("missing column")
	ErrNotNumber     = errors.New("not a number")
	ErrNotFinite     = errors.New("value is NaN or infinite")
	ErrUnsorted      = errors.New("timestamp earlier than the previous row's (time windows need rows sorted by time; slide does not reorder them)")
	ErrFieldCount    = errors.New("wrong number of fields")
	ErrSyntax        = errors.New("malformed row")
	ErrLineTooLong   = errors.New("line too long")
	// ErrHeaderTooLarge: a CSV header (or NDJSON's first object) past its limits.
	ErrHeaderTooLarge = errors.New("header too large")
	ErrNoRows         = errors.New("no data rows")
	// ErrDuplicateColumn: the job names a column the CSV header has twice (a join's export).
	ErrDuplicateColumn = errors.New("column named twice in the header")
)

// RowError is a problem with one input row. Row is the 0-based data row index (the header is
// not a row), Line the 1-based line of the file where the row starts (0 when unknown), Column
// the column name ("" when the problem is the row as a whole), Value the offending text
// (truncated), Err a sentinel above or a parse error.
type RowError struct {
	Row    int64
	Line   int64
	Column string
	Value  string
	Err    error
}

func (e *RowError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "row %d", e.Row)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, ", column %q", e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Value != "" {
		fmt.Fprintf(&b, ": %q", e.Value)
	} else if errors.Is(e.Err, ErrNotNumber) || errors.Is(e.Err, ErrTime) {
		b.WriteString(": empty (a missing value or null)")
	}
	return b.String()
}

func (e *RowError) Unwrap() error { return e.Err }

// shown truncates a field for an error message.
func shown(b []byte) string {
	const max = 64
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// Reader streams the rows of a file as columns of numbers. CSVReader and NDJSONReader implement
// it; a Job reads through it in batches, so the per-row work stays in the reader's own loop.
//
// Readers are not safe for concurrent use. They own their buffers: memory is O(longest line +
// buffer size), independent of the file length.
type Reader interface {
	// Columns returns the column names: a CSV header, or the keys of the first NDJSON object.
	Columns() []string
	// FirstRow returns the raw text of each column of the first data row, nil when there is no
	// row (or the first row is malformed: Read reports that). It does not consume the row.
	FirstRow() [][]byte
	// Select chooses the value column and, unless time is "", the time column that Read parses.
	// An unknown name is an error wrapping ErrMissingColumn that lists the columns.
	Select(value, time string) error
	// Read parses the next rows into vals (numbers) and ts (unix ms; only when a time column is
	// selected, len(ts) ≥ len(vals)) and returns how many it filled. At the end of the input it
	// returns 0, io.EOF. A bad row stops it with a *RowError; the rows before it are in n.
	Read(vals []float64, ts []int64) (n int, err error)
}

// missingColumn is the error for a name that is not among cols.
func missingColumn(name string, cols []string) error {
	if h := delimiterHint(cols); h != nil {
		return fmt.Errorf("%w %q (columns: %s: %w)", ErrMissingColumn, name, cols[0], h)
	}
	return fmt.Errorf("%w %q (columns: %s)", ErrMissingColumn, name, columnList(cols))
}

// columnList is the header's columns for an error message. A header that runs on past a
// carriage return is a file whose lines end in CR alone (Excel for Mac's "CSV (Macintosh)"):
// its whole text would be one line that a terminal overwrites at every CR, so it is cut there
// and named.
func columnList(cols []string) string {
	s := strings.Join(cols, ", ")
	if i := strings.IndexByte(s, '\r'); i >= 0 {
		return s[:i] + "…; the header runs on past a carriage return: lines ended by CR alone " +
			"(an old Mac export)? convert them with tr '\\r' '\\n'"
	}
	return s
}

// DelimiterHint is wrapped beside ErrMissingColumn or ErrColumn when a CSV header read as one
// column holding Delim, a common delimiter (ts;amount read with ','): most likely the file's
// own, so the caller can name its delimiter setting rather than its column.
type DelimiterHint struct{ Delim byte }

func (h *DelimiterHint) Error() string {
	if h.Delim == '\t' {
		return "one column holding a tab, the file's delimiter?"
	}
	return fmt.Sprintf("one column holding '%c', the file's delimiter?", h.Delim)
}

// delimiterHint returns the hint for cols, or nil: only a lone column holding ';', a tab or
// '|' (a header of many columns was split right).
func delimiterHint(cols []string) *DelimiterHint {
	if len(cols) != 1 {
		return nil
	}
	for _, d := range []byte{';', '\t', '|'} {
		if strings.IndexByte(cols[0], d) >= 0 {
			return &DelimiterHint{Delim: d}
		}
	}
	return nil
}

// uniqueColumns refuses a job column that the header names more than once: reading either
// one would be a guess, as SQL refuses an ambiguous column.
func uniqueColumns(cols []string, names ...string) error {
	for _, name := range names {
		if i := indexOf(cols, name); name != "" && i >= 0 {
			if j := indexOf(cols[i+1:], name); j >= 0 {
				return fmt.Errorf("%w: %q is columns %d and %d (rename one in the header)", ErrDuplicateColumn, name, i+1, i+j+2)
			}
		}
	}
	return nil
}

func indexOf(cols []string, name string) int {
	for i, c := range cols {
		if c == name {
			return i
		}
	}
	return -1
}

// trimSpace drops ASCII spaces and tabs around a field ("1, 2" exports are common).
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseValue parses a value field: a finite number.
func parseValue(b []byte) (float64, error) {
	b = trimSpace(b)
	v, err := ParseFloat(b)
	if err != nil {
		return 0, ErrNotNumber
	}
	if v-v != 0 { // NaN or ±Inf
		return 0, ErrNotFinite
	}
	return v, nil
}
