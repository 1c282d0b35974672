package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// parquetFast is Run's Reader over a Parquet file, for a plain job (one aggregate, no group,
// id, skip-bad or series): the value column (and the time column) are decoded page by page
// straight into []float64 and []int64, never boxed into parquet.Value or formatted as text, and
// the row groups are decoded on all cores (lane w takes row groups w, w+W, w+2W, …), handed to
// Read in file order. Memory is O(lanes × parquetFastChunks × parquetFastRows), whatever the
// row group size.
//
// The numbers are those of the row-by-row path (parquetTyped, or its text conversion where
// that one has no exact number), and so are the errors of bad rows (null, NaN): a job gives the
// same bits either way. Columns of any other type take the row-by-row path (supported reports
// which).
type parquetFast struct {
	src      *parquetRows
	val, tim pqNum // tim.leaf < 0: no time column
	starts   []int64
	lanes    []*pqLane
	done     chan struct{}
	wg       sync.WaitGroup
	started  bool
	closed   bool
	rg       int // row group Read is in
	cur      *pqChunk
	off      int
	err      error // sticky
	// fixed, when set before Select, has the lanes compute the values' fixed-point forms.
	fixed *fixedSpec
	// progress, when set, is called with the rows handed out so far, once per chunk.
	progress func(rows, bytes int64)
	rows     int64
	bytes    []int64 // compressed bytes of the row groups before each one
}

// bytesAt estimates the file bytes read when rows rows are handed out: the row groups before
// and the share of the current one (its compressed size × the share of its rows).
func (p *parquetFast) bytesAt(rows int64) int64 {
	g := p.rg
	if g >= len(p.starts)-1 {
		return p.bytes[len(p.bytes)-1]
	}
	in, all := rows-p.starts[g], p.starts[g+1]-p.starts[g]
	if all <= 0 {
		return p.bytes[g]
	}
	return p.bytes[g] + int64(float64(p.bytes[g+1]-p.bytes[g])*float64(in)/float64(all))
}

// parquetFastRows is the rows of one chunk a lane hands over; parquetFastChunks the chunks a
// lane may have decoded ahead of Read.
const (
	parquetFastRows   = 32 << 10
	parquetFastChunks = 3
)

// pqNum says how a leaf column's physical values become numbers.
type pqNum struct {
	leaf  int
	name  string
	kind  parquet.Kind
	scale int   // DECIMAL scale, -1 for none
	per   int64 // time column: TIMESTAMP units per ms; 1 for plain integers
	date  bool  // time column: DATE (days)
}

// pqChunk is up to parquetFastRows decoded rows of one row group.
type pqChunk struct {
	vals []float64
	ts   []int64
	// With parquetFast.fixed: ivals[:fixedN] are vals' fixed-point forms, vals[fixedN] (if
	// fixedN < n) the first value without one.
	ivals  []int64
	fixedN int
	n      int   // good rows
	err    error // after the n rows: a *RowError or a fatal error
	end    bool  // the row group's last chunk
	lane   *pqLane
}

type pqLane struct {
	out  chan *pqChunk
	free chan *pqChunk
}

// newParquetFast returns the fast reader of src's value and time column, or false when one of
// them has a type only the row-by-row path reads.
func newParquetFast(src *parquetRows, value, timeCol string) (*parquetFast, bool) {
	p := &parquetFast{src: src}
	var ok bool
	if p.val, ok = src.fastColumn(value, false); !ok {
		return nil, false
	}
	p.tim.leaf = -1
	if timeCol != "" {
		if p.tim, ok = src.fastColumn(timeCol, true); !ok {
			return nil, false
		}
	}
	return p, true
}

// lookupColumn finds a column by the name Columns gives it. A top-level column may have a dot
// in its name (p99.9 of a series file, http.status_code): that column first, else the nested
// path the dots spell.
func lookupColumn(schema *parquet.Schema, name string) (parquet.LeafColumn, bool) {
	if leaf, ok := schema.Lookup(name); ok {
		return leaf, true
	}
	return schema.Lookup(strings.Split(name, ".")...)
}

// fastColumn returns how the fast reader reads column name, false when it cannot.
func (p *parquetRows) fastColumn(name string, isTime bool) (pqNum, bool) {
	leaf, ok := lookupColumn(p.f.Schema(), name)
	if name == "" || !ok || leaf.MaxRepetitionLevel > 0 || leaf.MaxDefinitionLevel > 1 {
		return pqNum{}, false
	}
	lt, kind := parquetType(leaf.Node)
	n := pqNum{leaf: leaf.ColumnIndex, name: name, kind: kind, scale: -1, per: 1}
	switch t := lt.(type) {
	case nil, *format.IntType: // signed INT(bits) only: the pages hold the signed integers
		if it, ok := t.(*format.IntType); ok && !it.IsSigned {
			return pqNum{}, false // UINT_32/64 read as text (parquetConverter), row by row
		}
		switch n.kind {
		case parquet.Int32, parquet.Int64:
			return n, true
		case parquet.Float, parquet.Double:
			return n, !isTime
		}
	case *format.DecimalType:
		n.scale = int(t.Scale)
		return n, !isTime && n.scale >= 0 && (n.kind == parquet.Int32 || n.kind == parquet.Int64)
	case *format.TimestampType:
		if t.Unit.Value == nil || n.kind != parquet.Int64 || !isTime {
			return pqNum{}, false
		}
		n.per = int64(time.Millisecond / t.Unit.Value.Duration())
		return n, n.per >= 1
	case *format.DateType:
		n.date = true
		return n, isTime && n.kind == parquet.Int32
	}
	return pqNum{}, false
}

func (p *parquetFast) Columns() []string  { return p.src.Columns() }
func (p *parquetFast) FirstRow() [][]byte { return p.src.FirstRow() }

// Select checks that the columns are the ones newParquetFast was made for.
func (p *parquetFast) Select(value, time string) error {
	if value != p.val.name || (time != "") != (p.tim.leaf >= 0) || (time != "" && time != p.tim.name) {
		return fmt.Errorf("%w: the fast reader was opened for columns %q, %q", ErrConfig, p.val.name, p.tim.name)
	}
	return nil
}

func (p *parquetFast) start() {
	p.started = true
	groups := p.src.f.RowGroups()
	p.starts = make([]int64, len(groups)+1)
	p.bytes = make([]int64, len(groups)+1)
	meta := p.src.f.Metadata().RowGroups
	for i, g := range groups {
		p.starts[i+1] = p.starts[i] + max(g.NumRows(), 0)
		var b int64
		if i < len(meta) {
			for _, c := range meta[i].Columns {
				b += max(c.MetaData.TotalCompressedSize, 0)
			}
		}
		p.bytes[i+1] = p.bytes[i] + b
	}
	w := min(runtime.GOMAXPROCS(0), len(groups), 8)
	p.done = make(chan struct{})
	for i := range w {
		l := &pqLane{out: make(chan *pqChunk, parquetFastChunks-1), free: make(chan *pqChunk, parquetFastChunks+1)}
		p.lanes = append(p.lanes, l)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for rg := i; rg < len(groups); rg += w {
				if !p.decodeGroup(l, rg) {
					return
				}
			}
		}()
	}
}

// advance makes p.cur a chunk with rows left to hand out; io.EOF at the end, or the error
// that ended the rows before it.
func (p *parquetFast) advance() error {
	if p.err != nil {
		return p.err
	}
	if !p.started {
		p.start()
	}
	for p.cur == nil || p.off == p.cur.n {
		if c := p.cur; c != nil {
			if c.err != nil {
				p.err = c.err
				return p.err
			}
			if c.end {
				p.rg++
			}
			p.recycle(c)
			p.cur = nil
		}
		if p.rg >= len(p.starts)-1 {
			return io.EOF
		}
		p.cur, p.off = <-p.lanes[p.rg%len(p.lanes)].out, 0
		if p.progress != nil && p.rows > 0 {
			p.progress(p.rows, p.bytesAt(p.rows))
		}
		p.rows += int64(p.cur.n)
	}
	return nil
}

// Read hands out the decoded rows in file order.
func (p *parquetFast) Read(vals []float64, ts []int64) (int, error) {
	if err := p.advance(); err != nil {
		return 0, err
	}
	c := p.cur
	k := copy(vals, c.vals[p.off:c.n])
	if p.tim.leaf >= 0 {
		copy(ts[:k], c.ts[p.off:])
	}
	p.off += k
	if p.off == c.n && c.err != nil {
		p.err = c.err
		return k, p.err
	}
	return k, nil
}

// readFixed is Read for the fixed-point path of count sum/avg jobs (fixed set before Select):
// the lanes convert the values (fixedSpec.toFixed, the conversion Run makes of Read's values)
// while they decode them, off the aggregating core. more is false at the end, at an error (Read
// reports it) and at the first value with no fixed-point form (Read hands it out next).
func (p *parquetFast) readFixed(dst []int64) (n int, more bool) {
	if p.fixed == nil || p.tim.leaf >= 0 {
		return 0, false
	}
	for n < len(dst) {
		if p.advance() != nil {
			return n, false
		}
		c := p.cur
		if p.off >= c.fixedN {
			return n, false
		}
		k := copy(dst[n:], c.ivals[p.off:c.fixedN])
		n += k
		p.off += k
	}
	return n, true
}

func (p *parquetFast) recycle(c *pqChunk) {
	c.n, c.err, c.end, c.fixedN = 0, nil, false, 0
	select {
	case c.lane.free <- c:
	default:
	}
}

// Close stops the lanes and waits for them.
func (p *parquetFast) Close() error {
	if p.started && !p.closed {
		close(p.done)
		p.wg.Wait()
	}
	p.closed = true
	return nil
}

// decodeGroup decodes row group rg into chunks sent to l.out; false when the lane must stop
// (an error was sent, or Close).
func (p *parquetFast) decodeGroup(l *pqLane, rg int) (ok bool) {
	var cols []*pqColReader
	send := func(c *pqChunk) bool { // c belongs to Read once sent
		ok := c.err == nil
		select {
		case l.out <- c:
			return ok
		case <-p.done:
			return false
		}
	}
	chunk := func() *pqChunk {
		select {
		case c := <-l.free:
			return c
		default:
		}
		c := &pqChunk{vals: make([]float64, parquetFastRows), lane: l}
		if p.tim.leaf >= 0 {
			c.ts = make([]int64, parquetFastRows)
		}
		if p.fixed != nil {
			c.ivals = make([]int64, parquetFastRows)
		}
		return c
	}
	defer func() {
		for _, c := range cols {
			c.close()
		}
		if e := recover(); e != nil {
			c := chunk()
			c.err = fmt.Errorf("%w: malformed file (%v)", ErrParquet, e)
			send(c)
			ok = false
		}
	}()
	g := p.src.f.RowGroups()[rg]
	rows := g.NumRows()
	fail := func(err error) bool {
		c := chunk()
		c.err = err
		send(c)
		return false
	}
	specs := []*pqNum{&p.val}
	if p.tim.leaf >= 0 {
		specs = append(specs, &p.tim)
	}
	if rows > 0 {
		chunks := g.ColumnChunks()
		meta := p.src.f.Metadata().RowGroups
		for _, s := range specs {
			if s.leaf >= len(chunks) || rg >= len(meta) || s.leaf >= len(meta[rg].Columns) {
				return fail(fmt.Errorf("%w: row group %d has no column %d", ErrParquet, rg, s.leaf))
			}
			md := &meta[rg].Columns[s.leaf].MetaData
			if err := checkPages(p.src.r, p.src.size, md); err != nil {
				return fail(fmt.Errorf("%w: row group %d, column %q: %w", ErrParquet, rg, s.name, err))
			}
			explain := func(err error) error { return pageError(p.src.r, p.src.size, md, err) }
			cols = append(cols, &pqColReader{pages: chunks[s.leaf].Pages(), spec: s, rg: rg, explain: explain})
		}
	}
	row := p.starts[rg]
	for left := rows; ; {
		c := chunk()
		m := int(min(left, parquetFastRows))
		n, err := cols0(cols).floats(c.vals[:m], row)
		if len(cols) > 1 {
			if nt, errT := cols[1].millis(c.ts[:m], row); nt < n {
				n, err = nt, errT
			}
		}
		c.n, c.err = n, err
		if fx := p.fixed; fx != nil {
			c.fixedN = n
			for i, v := range c.vals[:n] {
				m, ok := fx.toFixed(v)
				if !ok {
					c.fixedN = i
					break
				}
				c.ivals[i] = m
			}
		}
		left -= int64(n)
		row += int64(n)
		end := left == 0 && err == nil
		c.end = end
		if !send(c) || end {
			return end
		}
	}
}

// cols0 is the value column's reader, nil when the row group has no rows.
func cols0(cols []*pqColReader) *pqColReader {
	if len(cols) == 0 {
		return nil
	}
	return cols[0]
}

// runParquetFast runs a plain job (one aggregate over a value column, no group, id, skip-bad
// or series) over src with parquetFast and Run's aggregation; ok is false when the job or
// its columns need the row-by-row path (which then reports any error of the job itself).
func (j Job) runParquetFast(ctx context.Context, src *parquetRows, series func(SeriesRow) error) (rep Report, ok bool, err error) {
	aggs := j.Aggregates()
	if series != nil || len(aggs) != 1 || j.GroupBy != "" || j.IDColumn != "" || j.SkipBad ||
		(j.countOnly() && j.Column == "") {
		return Report{}, false, nil
	}
	j = j.withDefaults()
	j.Agg, j.Aggs = aggs[0], nil
	timeCol := ""
	if j.Span > 0 {
		timeCol = j.TimeColumn
		if indexOf(src.Columns(), timeCol) < 0 {
			return Report{}, false, nil
		}
	}
	col := j.Column
	if col == "" {
		if col, err = j.detectColumn(src); err != nil {
			return Report{}, false, nil
		}
	}
	if indexOf(src.Columns(), col) < 0 {
		return Report{}, false, nil
	}
	fast, ok := newParquetFast(src, col, timeCol)
	if !ok {
		return Report{}, false, nil
	}
	fast.progress = j.Progress
	res, err := j.RunReader(ctx, fast, nil)
	if err != nil {
		var re *RowError
		if errors.As(err, &re) && re.Line == 0 {
			re.Line = re.Row + 1 // a Parquet row's "line" is its 1-based number
		}
		return Report{}, true, err
	}
	if res.Start >= 0 {
		res.StartLine, res.EndLine = res.Start+1, res.End+1
	}
	return Report{Results: []Result{res}, N: res.N}, true, nil
}
