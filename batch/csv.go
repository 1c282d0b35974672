// This file is over 600 lines: the CSV reader's fast path (SWAR delimiter scan, quoted
// fields, the parallel split) shares its scanner state; splitting it is left to the batch
// clean-up of issue #10.

package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
)

// CSVReader streams a CSV file with a header row (RFC 4180: comma separated, optional "\r\n",
// double-quoted fields with "" for a quote and line breaks inside quotes). Blank lines are
// skipped, spaces around unquoted values are ignored, a UTF-8 byte order mark is dropped, and a
// row with a different number of fields than the header is an error (ErrFieldCount).
//
// The fast path takes rows without a quote: it finds line ends and commas with
// bytes.IndexByte inside one large buffer and parses numbers in place, allocating nothing per
// row. Rows with a quote go through a full RFC 4180 field splitter. Quotes are found with one
// scan per buffer, so files that never quote pay nothing for that support.
//
// Construct with NewCSVReader. Not safe for concurrent use.
type CSVReader struct {
	l        *lineBuf
	cols     []string
	first    [][]byte // fields of the first data row (copies), nil when none
	pending  bool     // first has not been returned by Read yet
	firstAt  int64    // line of the first data row
	vi, ti   int      // selected columns; ti < 0 when no time column
	need     int      // max(vi, ti)
	row      int64    // data rows returned so far
	err      error    // sticky error
	rec      []byte   // a quoted record being assembled across lines
	fs       fieldSplitter
	selected bool

	// Fixed point (see readFixed): fixed is set before Select by count sum/avg jobs; a row read
	// as float64 that has no fixed-point form waits in heldV for the next Read.
	fixed *fixedSpec
	held  bool
	heldV float64

	// Parallel mode (see pipeline): par is non-nil while chunks are coming; cur is the parsed
	// chunk being handed out; when l is a chunk (or the rest of the input) being read
	// sequentially, seqEOF marks its end. lineBase is the line count before the current chunk.
	par      *pipeline
	cur      *chunk
	off      int
	inChunk  bool
	seqEOF   bool
	lineBase int64
}

// NewCSVReader reads the header (and peeks at the first data row) of a CSV stream.
func NewCSVReader(r io.Reader) (*CSVReader, error) {
	return newCSVReader(newLineBuf(r))
}

// newCSVReaderData reads a whole input held in memory, without copying it and without ever
// writing to it (it may be a read-only file mapping).
func newCSVReaderData(data []byte) (*CSVReader, error) {
	return newCSVReader(newLineBufData(data))
}

func newCSVReader(l *lineBuf) (*CSVReader, error) {
	c := &CSVReader{l: l, vi: -1, ti: -1}
	var line []byte
	var start int
	l.readHeader(true)
	for len(line) == 0 { // blank lines before the header are skipped too (as encoding/csv)
		var err error
		line, start, err = c.l.next()
		if err == io.EOF {
			return nil, fmt.Errorf("empty input: %w", ErrNoRows) // no header either: whatever the format
		}
		if err != nil {
			return nil, fmt.Errorf("reading CSV header: %w", err)
		}
	}
	at := c.l.line
	quoted := c.l.quoted(start, start+len(line))
	line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	fields, err := c.record(line, quoted)
	if err != nil {
		return nil, fmt.Errorf("reading CSV header: %w", err)
	}
	if c.cols, err = headerColumns(fields, at); err != nil {
		return nil, fmt.Errorf("reading CSV header: %w", err)
	}
	l.readHeader(false)
	// Peek at the first data row, for column detection; Read returns it first.
	for {
		line, start, err := c.l.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading CSV: %w", err)
		}
		if len(line) == 0 {
			continue
		}
		c.firstAt = c.l.line
		fields, err := c.record(line, c.l.quoted(start, start+len(line)))
		if err != nil {
			c.err = &RowError{Row: 0, Line: c.firstAt, Err: err}
			break
		}
		for _, f := range fields {
			c.first = append(c.first, bytes.Clone(f))
		}
		c.pending = true
		break
	}
	return c, nil
}

// Columns returns the header names (spaces trimmed).
func (c *CSVReader) Columns() []string { return c.cols }

// FirstRow returns the fields of the first data row, unquoted, or nil.
func (c *CSVReader) FirstRow() [][]byte { return c.first }

// Select chooses the value column and the time column ("" for none) that Read parses.
func (c *CSVReader) Select(value, time string) error {
	vi := indexOf(c.cols, value)
	if vi < 0 {
		return missingColumn(value, c.cols)
	}
	ti := -1
	if time != "" {
		if ti = indexOf(c.cols, time); ti < 0 {
			return missingColumn(time, c.cols)
		}
	}
	c.vi, c.ti, c.need, c.selected = vi, ti, max(vi, ti), true
	if c.err == nil && c.par == nil && c.cur == nil && !c.inChunk && c.l.line == c.firstAt {
		// Nothing read past the first row yet: hand the rest of the input to the pipeline.
		var fixed *fixedSpec
		if ti < 0 {
			fixed = c.fixed
		}
		if c.par = startPipeline(c.l.buf[c.l.lo:c.l.hi], c.l.rest(), c.l.mem, vi, ti, len(c.cols), fixed); c.par != nil {
			c.lineBase = c.l.line
		}
	}
	return nil
}

// Read parses the next rows: see Reader.
func (c *CSVReader) Read(vals []float64, ts []int64) (int, error) {
	if !c.selected {
		return 0, fmt.Errorf("batch: CSVReader.Read before Select")
	}
	if c.held && len(vals) > 0 {
		c.held = false
		vals[0] = c.heldV
		c.row++
		return 1 + c.readN(vals[1:], nil), c.err
	}
	if c.pending && len(vals) > 0 {
		c.pending = false
		if len(c.first) != len(c.cols) {
			c.err = c.fieldCount(len(c.first), c.firstAt)
			return 0, c.err
		}
		if err := c.take(c.first, c.firstAt, vals, ts, 0); err != nil {
			c.err = err
			return 0, err
		}
		c.row++
		if len(ts) > 0 {
			ts = ts[1:]
		}
		return 1 + c.readN(vals[1:], ts), c.err
	}
	if c.err != nil {
		return 0, c.err
	}
	n := c.readN(vals, ts)
	if n == 0 && c.err == nil {
		return 0, io.EOF
	}
	return n, c.err
}

// readN fills vals (and ts) until full, EOF or an error (left in c.err), from the pipeline's
// chunks when it runs, else from the line buffer.
func (c *CSVReader) readN(vals []float64, ts []int64) int {
	n := 0
	for n < len(vals) && c.err == nil {
		if c.par == nil || c.inChunk {
			if len(ts) > 0 {
				n += c.readSeq(vals[n:], ts[n:])
			} else {
				n += c.readSeq(vals[n:], nil)
			}
			if !c.seqEOF || c.par == nil {
				break
			}
			c.inChunk, c.seqEOF = false, false // that chunk is done: back to parsed ones
			continue
		}
		if c.cur == nil && !c.nextChunk() {
			break
		}
		if c.cur == nil {
			continue
		}
		k := min(len(vals)-n, c.cur.n-c.off)
		if f := c.cur.fixedN; c.off < f {
			for i, m := range c.cur.ivals[c.off:min(f, c.off+k)] {
				vals[n+i] = c.par.fixed.toFloat(m) // the float64 the value parses to
			}
			if c.off+k > f {
				copy(vals[n+f-c.off:n+k], c.cur.vals[f:])
			}
		} else {
			copy(vals[n:n+k], c.cur.vals[c.off:])
		}
		if len(ts) > 0 {
			copy(ts[n:n+k], c.cur.ts[c.off:])
		}
		n += k
		c.off += k
		c.row += int64(k)
		if c.off == c.cur.n {
			c.par.put(c.cur)
			c.cur = nil
		}
	}
	return n
}

// nextChunk takes the next chunk in input order: parsed (cur), or to be read sequentially
// (l, inChunk). It returns false at the end of the input or on an error.
func (c *CSVReader) nextChunk() bool {
	ch, ok := <-c.par.order
	if !ok { // the end: leave an empty line buffer so later Reads see EOF
		c.par.close()
		c.par = nil
		c.l = newLineBuf(eofReader{})
		c.seqEOF = true
		return false
	}
	<-ch.done
	switch {
	case ch.err != nil:
		c.err = fmt.Errorf("reading input: %w", ch.err)
		return false
	case ch.quoted: // in memory, quotes ahead: everything else is sequential
		data := c.par.data[ch.off:]
		c.par.close()
		c.par = nil
		c.l = newLineBufData(data)
		c.l.line = c.lineBase
		c.seqEOF = false
	case ch.rest != nil: // quotes ahead: everything else is sequential
		c.par.close()
		c.par = nil
		c.l = newLineBuf(ch.rest)
		c.l.line = c.lineBase
		c.seqEOF = false
	case !ch.ok: // a row scanRows would not take: the general path reports or skips it
		c.l = newLineBuf(bytes.NewReader(ch.data))
		c.l.line = c.lineBase
		c.lineBase += ch.lines
		c.inChunk, c.seqEOF = true, false
	default:
		c.cur, c.off = ch, 0
		c.lineBase += ch.lines
	}
	return true
}

// Close stops the parallel pipeline, if any (a Job closes its reader when it stops early).
// Reading after Close is an error-free EOF at the next chunk boundary.
func (c *CSVReader) Close() error {
	if c.par != nil {
		c.par.close()
	}
	return nil
}

// readSeq is readN over the line buffer; it sets seqEOF at the buffer's end.
func (c *CSVReader) readSeq(vals []float64, ts []int64) int {
	n := 0
	for n < len(vals) {
		if c.ti < 0 {
			n += c.fastRows(vals[n:], nil)
		} else {
			n += c.fastRows(vals[n:], ts[n:])
		}
		if n == len(vals) {
			break
		}
		// One row the slow way: a refill, a quote, a blank line or a bad row (whose error
		// this path reports with its line number).
		line, start, err := c.l.next()
		if err != nil {
			if err != io.EOF {
				c.err = err
			}
			c.seqEOF = true
			return n
		}
		if len(line) == 0 {
			continue
		}
		at := c.l.line
		var fv, ft []byte
		if !c.l.quoted(start, start+len(line)) {
			var nf int
			fv, ft, nf = c.split(line)
			if nf != len(c.cols) {
				c.err = c.fieldCount(nf, at)
				return n
			}
			v, err := parseValue(fv)
			if err != nil {
				c.err = &RowError{Row: c.row, Line: at, Column: c.cols[c.vi], Value: shown(fv), Err: err}
				return n
			}
			vals[n] = v
			if c.ti >= 0 {
				t, err := ParseTime(trimSpace(ft))
				if err != nil {
					c.err = &RowError{Row: c.row, Line: at, Column: c.cols[c.ti], Value: shown(ft), Err: err}
					return n
				}
				ts[n] = t
			}
		} else {
			fields, err := c.record(line, true)
			if err != nil {
				c.err = &RowError{Row: c.row, Line: at, Err: err}
				return n
			}
			if len(fields) != len(c.cols) {
				c.err = c.fieldCount(len(fields), at)
				return n
			}
			if err := c.take(fields, at, vals, ts, n); err != nil {
				c.err = err
				return n
			}
		}
		c.row++
		n++
	}
	return n
}

// readFixed is Read for the fixed-point path of count sum/avg jobs (useFixed before Select, no
// time column): it fills dst with the values' fixed-point forms (see fixedSpec) and returns how
// many, and more = false when the caller must go on with Read: at the end of the input, at an
// error (Read reports it), or at a value with no fixed-point form (Read returns it next).
func (c *CSVReader) readFixed(dst []int64) (n int, more bool) {
	fx := c.fixed
	if !c.selected || fx == nil || c.ti >= 0 || c.held || c.err != nil {
		return 0, false
	}
	if c.pending && len(dst) > 0 {
		if len(c.first) != len(c.cols) {
			return 0, false
		}
		v, err := parseValue(c.first[c.vi])
		if err != nil {
			return 0, false
		}
		m, ok := fx.toFixed(v)
		if !ok {
			return 0, false
		}
		c.pending = false
		dst[0] = m
		c.row++
		n = 1
	}
	for n < len(dst) && c.err == nil {
		if c.par == nil || c.inChunk {
			k, more := c.readSeqFixed(dst[n:])
			n += k
			if !more {
				return n, false
			}
			if n == len(dst) {
				break
			}
			if !c.seqEOF || c.par == nil {
				return n, false // the end
			}
			c.inChunk, c.seqEOF = false, false
			continue
		}
		if c.cur == nil && !c.nextChunk() {
			return n, false
		}
		if c.cur == nil {
			continue
		}
		f := c.cur.fixedN
		if c.off == f && f < c.cur.n {
			return n, false // a value with no fixed-point form: Read takes the rest of the chunk
		}
		k := copy(dst[n:], c.cur.ivals[c.off:f])
		n += k
		c.off += k
		c.row += int64(k)
		if c.off == c.cur.n {
			c.par.put(c.cur)
			c.cur = nil
		}
	}
	return n, c.err == nil
}

// readSeqFixed is readSeq in fixed point: quote-free regular rows straight from the buffer, any
// other row through readSeq (one row, as float64) and then toFixed. more is false at an error or
// a value without fixed-point form (held for Read); at the end of the buffer seqEOF is set.
func (c *CSVReader) readSeqFixed(dst []int64) (n int, more bool) {
	var one [1]float64
	for n < len(dst) {
		l := c.l
		k, p, _ := scanRowsFixed(l.buf[l.lo:l.quoteFree(l.lo)], c.vi, len(c.cols), c.fixed, dst[n:])
		c.row += int64(k)
		l.line += int64(k)
		l.lo += p
		n += k
		if n == len(dst) {
			break
		}
		if c.readSeq(one[:], nil) == 0 {
			return n, c.err == nil
		}
		m, ok := c.fixed.toFixed(one[0])
		if !ok {
			c.row-- // readSeq counted it; Read hands it out
			c.held, c.heldV = true, one[0]
			return n, false
		}
		dst[n] = m
		n++
	}
	return n, true
}

// fastRows parses complete, quote-free, well-formed rows straight out of the line buffer while
// they last (see scanRows) and leaves anything else to the general path.
func (c *CSVReader) fastRows(vals []float64, ts []int64) int {
	l := c.l
	buf := l.buf[:l.quoteFree(l.lo)] // rows must end before the next quote
	n, p := scanRows(buf[l.lo:], c.vi, c.ti, len(c.cols), vals, ts)
	c.row += int64(n)
	l.line += int64(n)
	l.lo += p
	return n
}

// scanRows parses complete, quote-free, well-formed rows of buf (ncols fields, a finite value
// in field vi, a timestamp in field ti when ti ≥ 0) into vals and ts, and returns how many and
// the offset after the last one. One loop over the bytes finds the commas and the newline,
// with no call per field or per line. It stops at anything else (an unterminated last line, a
// blank line, a wrong field count, a value that does not parse) and leaves that row to the
// general path, which reports errors with their line numbers.
func scanRows(buf []byte, vi, ti, ncols int, vals []float64, ts []int64) (n, p int) {
	for n < len(vals) {
		col, fs := 0, p
		vs, ve, tss, tse := 0, 0, 0, 0
		i := p
		for {
			i = nextDelim(buf, i)
			if i == len(buf) {
				break
			}
			b := buf[i]
			e := i
			if b == '\n' && e > fs && buf[e-1] == '\r' {
				e--
			}
			if col == vi {
				vs, ve = fs, e
			} else if col == ti {
				tss, tse = fs, e
			}
			if b == '\n' {
				break
			}
			col++
			i++
			fs = i
		}
		if i == len(buf) || col+1 != ncols || i == p {
			break
		}
		v, err := parseValue(buf[vs:ve])
		if err != nil {
			break
		}
		if ti >= 0 {
			t, err := ParseTime(trimSpace(buf[tss:tse]))
			if err != nil {
				break
			}
			ts[n] = t
		}
		vals[n] = v
		n++
		p = i + 1
	}
	return n, p
}

// scanRowsFixed is scanRows for a count sum/avg job: see scanRowsFixedAny. When the value is
// the last column (the usual "ts,amount" shape) one fused loop skips the fields before it and
// parses the value with the same 8-byte word that finds the line end, with no call per row.
// Rows it does not recognize at once (a sign, spaces, a long number, the last bytes of buf) go
// one at a time through scanRowsFixedAny, so the two agree row for row.
func scanRowsFixed(buf []byte, vi, ncols int, fx *fixedSpec, out []int64) (n, p int, notFixed bool) {
	if vi != ncols-1 {
		return scanRowsFixedAny(buf, vi, ncols, fx, out)
	}
	scale, lim := fx.scale, fx.lim
	for n < len(out) {
		i := p
		for c := 0; c < vi; c++ { // the fields before the value: find each ','
			for {
				if i+8 > len(buf) {
					goto slow // the last bytes of buf: one row at a time
				}
				w := binary.LittleEndian.Uint64(buf[i:])
				if m := zeroByte(w^commas) | zeroByte(w^newlines); m != 0 {
					i += bits.TrailingZeros64(m) >> 3
					break
				}
				i += 8
			}
			if buf[i] == '\n' {
				goto slow
			}
			i++
		}
		if i+8 > len(buf) {
			goto slow
		}
		{
			w := binary.LittleEndian.Uint64(buf[i:])
			// Non-digit flags: a byte ≥ 0x80, or an ASCII byte outside '0'–'9'. Exact for the
			// lowest two non-digits, which are all that is used: the sum below may carry out of
			// a byte ≥ 0xBA into the byte above it, never below.
			ge0 := ((w | hiBits) - zeros) & hiBits
			gt9 := (w + 0x4646464646464646) & hiBits
			other := (^(ge0 &^ gt9) | w) & hiBits
			if other == 0 {
				goto slow
			}
			k := bits.TrailingZeros64(other) >> 3 // first non-digit
			frac, d := 0, k                       // fraction digits, digits
			if byte(w>>(8*k&63)) == '.' {
				rest := other & (other - 1)
				if rest == 0 {
					goto slow
				}
				e := bits.TrailingZeros64(rest) >> 3 // the byte after the number
				low := uint64(1)<<(8*k&63) - 1
				w = w&low | (w>>8)&^low // drop the point
				frac, d, k = e-k-1, e-1, e
			}
			if d == 0 || frac > scale {
				goto slow
			}
			e := i + k // the byte after the number
			if b := buf[e]; b == '\n' {
				e++
			} else if b == '\r' && e+1 < len(buf) && buf[e+1] == '\n' {
				e += 2
			} else {
				goto slow
			}
			sh := (64 - 8*d) & 63 // d is 1–7 here
			v := (w - zeros&(uint64(math.MaxUint64)>>sh)) << sh
			v = (v * 10) + (v >> 8)
			v = (((v & 0x000000FF000000FF) * (100 + (1000000 << 32))) +
				(((v >> 16) & 0x000000FF000000FF) * (1 + (10000 << 32)))) >> 32
			m := int64(v) * fx.mul[frac]
			if m > lim {
				goto slow
			}
			out[n] = m
			n++
			p = e
			continue
		}
	slow:
		k, q, nf := scanRowsFixedAny(buf[p:], vi, ncols, fx, out[n:n+1])
		if k == 0 {
			return n, p, nf
		}
		n++
		p += q
	}
	return n, p, false
}

// scanRowsFixedAny is scanRows for a count sum/avg job: the value of each row goes into out in
// fixed point (see fixedSpec.parseFixed). It also stops before a row whose value is a number
// with no fixed-point form, and says so (notFixed). Its field loop is scanRows' written again
// on purpose: a shared loop would test per field which of the two it is filling.
func scanRowsFixedAny(buf []byte, vi, ncols int, fx *fixedSpec, out []int64) (n, p int, notFixed bool) {
	for n < len(out) {
		col, fs := 0, p
		vs, ve := 0, 0
		i := p
		for {
			i = nextDelim(buf, i)
			if i == len(buf) {
				break
			}
			b := buf[i]
			e := i
			if b == '\n' && e > fs && buf[e-1] == '\r' {
				e--
			}
			if col == vi {
				vs, ve = fs, e
			}
			if b == '\n' {
				break
			}
			col++
			i++
			fs = i
		}
		if i == len(buf) || col+1 != ncols || i == p {
			break
		}
		m, ok, err := fx.parseFixed(buf, vs, ve)
		if !ok {
			return n, p, err == nil
		}
		out[n] = m
		n++
		p = i + 1
	}
	return n, p, false
}

const (
	lsb      = 0x0101010101010101
	commas   = ',' * lsb
	newlines = '\n' * lsb
)

// nextDelim returns the index of the first ',' or '\n' in buf at or after i, or len(buf).
// It looks eight bytes at a time (SWAR): most bytes of a numeric CSV are digits.
func nextDelim(buf []byte, i int) int {
	for i+8 <= len(buf) {
		w := binary.LittleEndian.Uint64(buf[i:])
		if m := zeroByte(w^commas) | zeroByte(w^newlines); m != 0 {
			return i + bits.TrailingZeros64(m)>>3 // the lowest flag is exact
		}
		i += 8
	}
	for i < len(buf) && buf[i] != ',' && buf[i] != '\n' {
		i++
	}
	return i
}

// zeroByte flags (0x80) the zero bytes of x. Bytes above a zero byte may be flagged falsely
// (borrow), so only the lowest flag is reliable, which is the one used.
func zeroByte(x uint64) uint64 { return (x - lsb) &^ x & (lsb << 7) }

// take parses the selected fields of a split row into vals[n] and ts[n].
func (c *CSVReader) take(fields [][]byte, at int64, vals []float64, ts []int64, n int) error {
	if c.need >= len(fields) {
		return c.fieldCount(len(fields), at)
	}
	v, err := parseValue(fields[c.vi])
	if err != nil {
		return &RowError{Row: c.row, Line: at, Column: c.cols[c.vi], Value: shown(fields[c.vi]), Err: err}
	}
	vals[n] = v
	if c.ti >= 0 {
		t, err := ParseTime(trimSpace(fields[c.ti]))
		if err != nil {
			return &RowError{Row: c.row, Line: at, Column: c.cols[c.ti], Value: shown(fields[c.ti]), Err: err}
		}
		ts[n] = t
	}
	return nil
}

func (c *CSVReader) fieldCount(got int, at int64) error {
	return &RowError{Row: c.row, Line: at, Err: fieldCountError(got, len(c.cols))}
}

// fieldCountError is the error of a row of got fields under a header of want columns. Past
// columnLimit the splitters stop counting (a row is split into at most columnLimit + 1
// fields, whatever its length).
func fieldCountError(got, want int) error {
	if got > columnLimit {
		return fmt.Errorf("%w: more than %d, the header has %d", ErrFieldCount, columnLimit, want)
	}
	return fmt.Errorf("%w: %d, the header has %d", ErrFieldCount, got, want)
}

// headerColumns returns the column names of a header split into fields (starting on line
// at), or ErrHeaderTooLarge past columnLimit columns.
func headerColumns(fields [][]byte, at int64) ([]string, error) {
	if len(fields) > columnLimit {
		return nil, headerTooLarge(at, fmt.Sprintf("more than %d columns", columnLimit))
	}
	cols := make([]string, len(fields))
	for i, f := range fields {
		cols[i] = string(trimSpace(f))
	}
	return cols, nil
}

// split finds the selected fields of a quote-free line and counts its fields: one byte loop
// over the line (cheaper than an IndexByte call per field on short lines).
func (c *CSVReader) split(line []byte) (fv, ft []byte, nf int) {
	col, start := 0, 0
	vi, ti := c.vi, c.ti
	for i, b := range line {
		if b != ',' {
			continue
		}
		if col == vi {
			fv = line[start:i]
		} else if col == ti {
			ft = line[start:i]
		}
		col++
		start = i + 1
	}
	if col == vi {
		fv = line[start:]
	} else if col == ti {
		ft = line[start:]
	}
	return fv, ft, col + 1
}

// record splits a full RFC 4180 record that starts with line, reading more lines while a quoted
// field is open. Fields are unescaped; they stay valid until the next call.
func (c *CSVReader) record(line []byte, quoted bool) ([][]byte, error) {
	rec := line
	if quoted {
		var err error
		if c.rec, err = c.l.record(c.rec[:0], line, ','); err != nil {
			return nil, err
		}
		rec = c.rec
	}
	fields, complete := c.splitRecord(rec)
	if !complete { // not reached: l.record reads on until no quoted field is open
		return nil, fmt.Errorf("%w: unterminated quoted field", ErrSyntax)
	}
	return fields, nil
}

// splitRecord splits rec into fields on commas (fieldSplitter), unquoted fields as they are;
// complete is false when a quoted field is still open at the end.
func (c *CSVReader) splitRecord(rec []byte) (fields [][]byte, complete bool) {
	return c.fs.split(rec, ',', false)
}
