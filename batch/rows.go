package batch

import (
	"bytes"
	"fmt"
	"io"
)

// rowSource hands out the rows of an input one at a time as the raw text of the columns a job
// asked for: the row-by-row path of RunAll (group-by, several aggregates, Parquet, compressed
// input, --skip-bad, file lines and ids in the result). CSV, NDJSON and Parquet implement it.
type rowSource interface {
	// Columns returns the column names.
	Columns() []string
	// FirstRow returns the raw text of every column of the first data row, nil when none.
	FirstRow() [][]byte
	// Select chooses the columns Next returns, in this order ("" is a column Next leaves nil).
	Select(cols []string) error
	// Next returns the selected fields of the next row (valid until the next call) and the
	// 1-based file line where the row starts (for Parquet: the 1-based row number). A bad row is
	// a *RowError (Row left 0: the caller numbers rows) after which Next goes on with the row
	// after it; the end is io.EOF; any other error is fatal.
	Next() (fields [][]byte, line int64, err error)
}

// csvRows is the row-by-row CSV reader: the same dialect as CSVReader (RFC 4180 quotes,
// blank lines skipped, a byte order mark dropped, spaces around unquoted fields ignored) with
// any single-byte delimiter.
type csvRows struct {
	l     *lineBuf
	delim byte
	cols  []string
	first [][]byte
	idx   []int // selected column indexes, -1 for ""
	out   [][]byte
	rec   []byte
	fs    fieldSplitter
	// The first data row, read by newCSVRows: Next returns it (or its error) first.
	pend    bool
	pendAt  int64
	pendErr error
}

func newCSVRows(r io.Reader, delim byte) (*csvRows, error) {
	c := &csvRows{l: newLineBuf(r), delim: delim}
	var line []byte
	c.l.readHeader(true)
	for len(line) == 0 {
		var err error
		if line, _, err = c.l.next(); err == io.EOF {
			return nil, fmt.Errorf("empty input: %w", ErrNoRows) // no header either: whatever the format
		} else if err != nil {
			return nil, fmt.Errorf("reading CSV header: %w", err)
		}
	}
	hline := c.l.line
	line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	fields, err := c.record(line)
	if err != nil {
		return nil, fmt.Errorf("reading CSV header: %w", err)
	}
	if c.cols, err = headerColumns(fields, hline); err != nil {
		return nil, fmt.Errorf("reading CSV header: %w", err)
	}
	c.l.readHeader(false)
	// Read the first data row now (for column detection); Next hands it out first.
	fields, at, err := c.row()
	c.pend, c.pendAt, c.pendErr = true, at, err
	if err == nil {
		for _, f := range fields {
			c.first = append(c.first, bytes.Clone(f))
		}
	} else if err != io.EOF {
		if _, ok := err.(*RowError); !ok {
			return nil, fmt.Errorf("reading CSV: %w", err)
		}
	}
	return c, nil
}

func (c *csvRows) Columns() []string  { return c.cols }
func (c *csvRows) FirstRow() [][]byte { return c.first }

func (c *csvRows) Select(cols []string) error {
	c.idx, c.out = selectIndexes(cols, c.cols)
	for i, name := range cols {
		if name != "" && c.idx[i] < 0 {
			return missingColumn(name, c.cols)
		}
	}
	return uniqueColumns(c.cols, cols...)
}

func selectIndexes(want, have []string) ([]int, [][]byte) {
	idx := make([]int, len(want))
	for i, name := range want {
		idx[i] = -1
		if name != "" {
			idx[i] = indexOf(have, name)
		}
	}
	return idx, make([][]byte, len(want))
}

func (c *csvRows) Next() ([][]byte, int64, error) {
	var fields [][]byte
	var at int64
	var err error
	if c.pend {
		c.pend = false
		fields, at, err = c.first, c.pendAt, c.pendErr
	} else {
		fields, at, err = c.row()
	}
	if err != nil {
		return nil, at, err
	}
	for i, k := range c.idx {
		c.out[i] = nil
		if k >= 0 {
			c.out[i] = fields[k]
		}
	}
	return c.out, at, nil
}

// row reads the next non-blank record and checks its field count.
func (c *csvRows) row() ([][]byte, int64, error) {
	for {
		line, _, err := c.l.next()
		if err != nil {
			return nil, 0, err
		}
		if len(line) == 0 {
			continue
		}
		at := c.l.line
		fields, err := c.record(line)
		if err != nil {
			return nil, at, &RowError{Line: at, Err: err}
		}
		if len(fields) != len(c.cols) {
			return nil, at, &RowError{Line: at, Err: fieldCountError(len(fields), len(c.cols))}
		}
		return fields, at, nil
	}
}

// record splits a full RFC 4180 record that starts with line, reading more lines while a
// quoted field is open (as CSVReader.record, with c.delim).
func (c *csvRows) record(line []byte) ([][]byte, error) {
	rec := line
	if bytes.IndexByte(line, '"') >= 0 {
		var err error
		if c.rec, err = c.l.record(c.rec[:0], line, c.delim); err != nil {
			return nil, err
		}
		rec = c.rec
	}
	fields, complete := c.fs.split(rec, c.delim, true)
	if !complete { // not reached: l.record reads on until no quoted field is open
		return nil, fmt.Errorf("%w: unterminated quoted field", ErrSyntax)
	}
	return fields, nil
}

// ndjsonRows is the row-by-row NDJSON reader (the dialect of NDJSONReader): string values are
// their content, numbers and literals their token, objects and arrays their raw text; a
// missing key is a bad row.
type ndjsonRows struct {
	l     *lineBuf
	cols  []string
	first [][]byte
	want  []string
	out   [][]byte
	kinds []byte
	// The first object's line, read by newNDJSONRows: Next parses it first.
	pend   []byte
	pendAt int64
}

func newNDJSONRows(r io.Reader) (*ndjsonRows, error) {
	d := &ndjsonRows{l: newLineBuf(r)}
	line, _, cols, first, err := firstObject(d.l)
	if err != nil {
		return nil, err
	}
	d.cols, d.first = cols, first
	d.pend, d.pendAt = bytes.Clone(line), d.l.line
	return d, nil
}

func (d *ndjsonRows) Columns() []string  { return d.cols }
func (d *ndjsonRows) FirstRow() [][]byte { return d.first }

func (d *ndjsonRows) Select(cols []string) error {
	for _, name := range cols {
		if name != "" && indexOf(d.cols, name) < 0 {
			return missingColumn(name, d.cols)
		}
	}
	d.want, d.out, d.kinds = cols, make([][]byte, len(cols)), make([]byte, len(cols))
	return nil
}

func (d *ndjsonRows) Next() ([][]byte, int64, error) {
	for {
		var line []byte
		var at int64
		if d.pend != nil {
			line, at, d.pend = d.pend, d.pendAt, nil
		} else {
			var err error
			if line, _, err = d.l.next(); err != nil {
				return nil, 0, err
			}
			at = d.l.line
		}
		if len(trimJSONSpace(line)) == 0 {
			continue
		}
		for i := range d.out {
			d.out[i], d.kinds[i] = nil, 0
		}
		o := jsonObject{b: line}
		for o.next() {
			for i, name := range d.want {
				if name != "" && o.keyIs(name) {
					d.out[i], d.kinds[i] = o.val, o.kind
				}
			}
		}
		if o.err != nil {
			return nil, at, &RowError{Line: at, Err: o.err}
		}
		for i, name := range d.want {
			switch {
			case name == "":
			case d.kinds[i] == 0:
				return nil, at, &RowError{Line: at, Column: name, Err: ErrMissingColumn}
			case d.kinds[i] == 's':
				d.out[i] = unescape(d.out[i])
			case d.kinds[i] == 'o':
				// objects and arrays: raw text, which is not a number or a timestamp
			}
		}
		return d.out, at, nil
	}
}

// firstRowErr is the error of the first data row, read ahead by newCSVRows, if it was bad.
func (c *csvRows) firstRowErr() error {
	if _, ok := c.pendErr.(*RowError); ok && c.pend {
		return c.pendErr
	}
	return nil
}

// firstRowErr is the error of the first data row, read ahead by newCSVReader, if it was bad.
func (c *CSVReader) firstRowErr() error {
	if c.first == nil {
		return c.err
	}
	return nil
}
