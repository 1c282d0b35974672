package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// ErrParquet wraps every error of a Parquet input that is not about one row: a bad footer,
// a corrupt page, a column type slide cannot read.
var ErrParquet = errors.New("bad Parquet input")

// parquetMaxPage bounds the compressed and uncompressed size of one page slide reads: pages
// are decoded one at a time, and a hostile file's page header must not make the decoder
// allocate gigabytes (parquet-go allocates what the header says). Writers use pages of 8 KiB
// to 1 MiB; 64 MiB leaves a wide margin.
const parquetMaxPage = 64 << 20

// parquetRows reads the selected columns of a Parquet file, row group by row group and page by
// page: memory is O(selected columns × page size), never O(file). A row's "line" is its 1-based
// row number in the file. Values are handed out as text: numbers in encoding/json's format,
// DECIMAL as its decimal digits, TIMESTAMP and DATE as unix milliseconds, strings as they are,
// null as "" (which is a bad value, or the group "").
type parquetRows struct {
	r     io.ReaderAt
	size  int64
	f     *parquet.File
	cols  []string
	first [][]byte
	sel   []int // leaf column index per selected column, -1 for ""
	conv  []func([]byte, parquet.Value) []byte
	// typed: Next hands the value (selection 0) and time (1) columns out as numbers (see
	// typedSource) where the column type allows, instead of formatting them as text.
	typed  bool
	numFn  []func(parquet.Value) (float64, bool)
	msFn   []func(parquet.Value) int64
	nums   []float64
	ms     []int64
	numOK  []bool
	rg     int // next row group
	cur    []*colCursor
	left   int64 // rows left in the current row group
	row    int64
	out    [][]byte
	bufs   [][]byte
	closed bool
}

// colCursor hands out the values of one column chunk in order.
type colCursor struct {
	pages parquet.Pages
	page  parquet.Page
	vals  parquet.ValueReader
	buf   []parquet.Value
	i, n  int
}

func (c *colCursor) next() (v parquet.Value, err error) {
	for c.i == c.n {
		if c.vals != nil {
			n, err := c.vals.ReadValues(c.buf[:cap(c.buf)])
			c.buf, c.i, c.n = c.buf[:n], 0, n
			if n > 0 {
				break
			}
			if err != nil && err != io.EOF {
				return v, err
			}
			parquet.Release(c.page)
			c.vals, c.page = nil, nil
		}
		p, err := c.pages.ReadPage()
		if err != nil {
			if err == io.EOF {
				return v, io.ErrUnexpectedEOF // fewer values than the row group's rows
			}
			return v, err
		}
		c.page, c.vals = p, p.Values()
	}
	v = c.buf[c.i]
	c.i++
	return v, nil
}

func (c *colCursor) close() {
	if c.page != nil {
		parquet.Release(c.page)
	}
	c.pages.Close()
}

func newParquetRows(r io.ReaderAt, size int64) (p *parquetRows, err error) {
	defer recoverParquet(&err)
	if err := checkFooter(r, size); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrParquet, err)
	}
	f, err := parquet.OpenFile(r, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true),
		parquet.ReadBufferSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrParquet, err)
	}
	p = &parquetRows{r: r, size: size, f: f}
	paths := f.Schema().Columns()
	if len(paths) > columnLimit {
		return nil, fmt.Errorf("%w: %d columns (limit %d)", ErrParquet, len(paths), columnLimit)
	}
	for _, path := range paths {
		p.cols = append(p.cols, strings.Join(path, "."))
	}
	// The first row, for column detection: read it one column at a time (each column chunk
	// holds a read buffer and a decoded page, so all of them at once would cost the file's
	// width times that), then start over.
	for _, col := range p.cols {
		if err := p.Select([]string{col}); err != nil {
			return nil, err
		}
		fields, _, err := p.Next()
		p.Close()
		p.rg, p.row, p.left, p.cur, p.closed = 0, 0, 0, nil, false
		switch {
		case err == nil:
			p.first = append(p.first, append([]byte(nil), fields[0]...))
		case err == io.EOF:
			p.first = nil // no rows
			return p, nil
		default:
			var re *RowError
			if !errors.As(err, &re) {
				return nil, err
			}
			p.first = nil // a malformed first row: Next reports it
			return p, nil
		}
	}
	return p, nil
}

// recoverParquet turns a panic inside parquet-go (a hostile file can reach one) into an error.
func recoverParquet(err *error) {
	if e := recover(); e != nil {
		*err = fmt.Errorf("%w: malformed file (%v)", ErrParquet, e)
	}
}

func (p *parquetRows) Columns() []string  { return p.cols }
func (p *parquetRows) FirstRow() [][]byte { return p.first }

func (p *parquetRows) Select(cols []string) error {
	p.sel = make([]int, len(cols))
	p.conv = make([]func([]byte, parquet.Value) []byte, len(cols))
	p.out, p.bufs = make([][]byte, len(cols)), make([][]byte, len(cols))
	p.numFn, p.msFn = make([]func(parquet.Value) (float64, bool), len(cols)), make([]func(parquet.Value) int64, len(cols))
	p.nums, p.ms, p.numOK = make([]float64, len(cols)), make([]int64, len(cols)), make([]bool, len(cols))
	schema := p.f.Schema()
	for i, name := range cols {
		p.sel[i] = -1
		if name == "" {
			continue
		}
		leaf, ok := lookupColumn(schema, name)
		if !ok {
			return missingColumn(name, p.cols)
		}
		if leaf.MaxRepetitionLevel > 0 {
			return fmt.Errorf("%w: column %q is repeated (a list): slide reads flat columns", ErrParquet, name)
		}
		conv, err := parquetConverter(leaf.Node)
		if err != nil {
			return fmt.Errorf("%w: column %q: %w", ErrParquet, name, err)
		}
		p.sel[i], p.conv[i] = leaf.ColumnIndex, conv
		p.numFn[i], p.msFn[i] = parquetTyped(leaf.Node)
	}
	return nil
}

// parquetType returns a column's logical type (nil when it has none) and its physical kind.
func parquetType(n parquet.Node) (format.LogicalTypeValue, parquet.Kind) {
	typ := n.Type()
	if l := typ.LogicalType(); l != nil {
		return l.Value, typ.Kind()
	}
	return nil, typ.Kind()
}

// parquetConverter returns how a column's values become text.
func parquetConverter(n parquet.Node) (func([]byte, parquet.Value) []byte, error) {
	lt, kind := parquetType(n)
	switch t := lt.(type) {
	case *format.TimestampType:
		unit := t.Unit.Value
		if unit == nil || kind != parquet.Int64 {
			return nil, fmt.Errorf("unsupported TIMESTAMP encoding")
		}
		per := int64(time.Millisecond / unit.Duration()) // units per millisecond (1, 1000, 1e6)
		return func(b []byte, v parquet.Value) []byte {
			x := v.Int64()
			ms := x / per
			if x%per != 0 && x < 0 {
				ms-- // toward the past, as ParseTime truncates RFC 3339
			}
			return strconv.AppendInt(b, ms, 10)
		}, nil
	case *format.DateType:
		return func(b []byte, v parquet.Value) []byte {
			return strconv.AppendInt(b, int64(v.Int32())*86_400_000, 10)
		}, nil
	case *format.DecimalType:
		scale := int(t.Scale)
		switch kind {
		case parquet.Int32:
			return func(b []byte, v parquet.Value) []byte { return appendDecimal(b, int64(v.Int32()), scale) }, nil
		case parquet.Int64:
			return func(b []byte, v parquet.Value) []byte { return appendDecimal(b, v.Int64(), scale) }, nil
		}
		return nil, fmt.Errorf("unsupported DECIMAL encoding %v (want INT32 or INT64)", kind)
	case *format.IntType: // UINT_32/64 (DuckDB's UINTEGER, UBIGINT) sit in INT32/64's bits
		if !t.IsSigned && kind == parquet.Int32 {
			return func(b []byte, v parquet.Value) []byte { return strconv.AppendUint(b, uint64(v.Uint32()), 10) }, nil
		} else if !t.IsSigned && kind == parquet.Int64 {
			return func(b []byte, v parquet.Value) []byte { return strconv.AppendUint(b, v.Uint64(), 10) }, nil
		}
	}
	switch kind {
	case parquet.Boolean:
		return func(b []byte, v parquet.Value) []byte { return strconv.AppendBool(b, v.Boolean()) }, nil
	case parquet.Int32:
		return func(b []byte, v parquet.Value) []byte { return strconv.AppendInt(b, int64(v.Int32()), 10) }, nil
	case parquet.Int64:
		return func(b []byte, v parquet.Value) []byte { return strconv.AppendInt(b, v.Int64(), 10) }, nil
	case parquet.Float:
		return func(b []byte, v parquet.Value) []byte { return appendNumber(b, float64(v.Float())) }, nil
	case parquet.Double:
		return func(b []byte, v parquet.Value) []byte { return appendNumber(b, v.Double()) }, nil
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return func(b []byte, v parquet.Value) []byte { return append(b, v.ByteArray()...) }, nil
	}
	return nil, fmt.Errorf("unsupported type %v", kind)
}

// appendDecimal writes the unscaled integer m with scale digits after the point.
func appendDecimal(b []byte, m int64, scale int) []byte {
	if scale <= 0 {
		return strconv.AppendInt(b, m, 10)
	}
	if m < 0 {
		b = append(b, '-')
	}
	u := uint64(m)
	if m < 0 {
		u = uint64(-m)
	}
	s := strconv.FormatUint(u, 10)
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	b = append(b, s[:len(s)-scale]...)
	b = append(b, '.')
	return append(b, s[len(s)-scale:]...)
}

// openRowGroup starts the cursors of the next row group with rows; false at the end.
func (p *parquetRows) openRowGroup() (bool, error) {
	groups := p.f.RowGroups()
	meta := p.f.Metadata().RowGroups
	for p.rg < len(groups) {
		g := groups[p.rg]
		p.rg++
		if g.NumRows() <= 0 {
			continue
		}
		chunks := g.ColumnChunks()
		p.closeCursors()
		p.cur = make([]*colCursor, len(p.sel))
		for i, ci := range p.sel {
			if ci < 0 {
				continue
			}
			if ci >= len(chunks) {
				return false, fmt.Errorf("%w: row group %d has no column %d", ErrParquet, p.rg-1, ci)
			}
			if p.rg-1 >= len(meta) || ci >= len(meta[p.rg-1].Columns) {
				return false, fmt.Errorf("%w: row group %d has no metadata for column %d", ErrParquet, p.rg-1, ci)
			}
			if err := checkPages(p.r, p.size, &meta[p.rg-1].Columns[ci].MetaData); err != nil {
				return false, fmt.Errorf("%w: row group %d, column %q: %w", ErrParquet, p.rg-1, p.cols[ci], err)
			}
			p.cur[i] = &colCursor{pages: chunks[ci].Pages(), buf: make([]parquet.Value, 0, 1024)}
		}
		p.left = g.NumRows()
		return true, nil
	}
	return false, nil
}

func (p *parquetRows) Next() (fields [][]byte, line int64, err error) {
	defer recoverParquet(&err)
	if p.closed {
		return nil, 0, io.EOF
	}
	for p.left == 0 {
		ok, err := p.openRowGroup()
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, 0, io.EOF
		}
	}
	p.left--
	p.row++
	for i, c := range p.cur {
		p.out[i] = nil
		if c == nil {
			continue
		}
		v, err := c.next()
		if err != nil {
			p.left = 0
			err = pageError(p.r, p.size, &p.f.Metadata().RowGroups[p.rg-1].Columns[p.sel[i]].MetaData, err)
			return nil, p.row, fmt.Errorf("%w: row %d (row group %d), column %q: %w", ErrParquet, p.row, p.rg-1, p.cols[p.sel[i]], err)
		}
		p.numOK[i] = false
		if p.typed && i < 2 && !v.IsNull() {
			switch {
			case i == 0 && p.numFn[i] != nil:
				p.nums[i], p.numOK[i] = p.numFn[i](v)
			case i == 1 && p.msFn[i] != nil:
				p.ms[i], p.numOK[i] = p.msFn[i](v), true
			}
			if p.numOK[i] {
				continue
			}
		}
		p.bufs[i] = p.bufs[i][:0]
		if !v.IsNull() {
			p.bufs[i] = p.conv[i](p.bufs[i], v)
		}
		p.out[i] = p.bufs[i]
	}
	return p.out, p.row, nil
}

// typedSource is a rowSource that can hand out the value column (selection 0) as a number
// and the time column (selection 1) as unix ms without text, after the Next that read them.
// ok is false when the row's field must be read as text (Next then returned it).
type typedSource interface {
	setTyped()
	number() (float64, bool)
	millis() (int64, bool)
}

func (p *parquetRows) setTyped()               { p.typed = true }
func (p *parquetRows) number() (float64, bool) { return p.nums[0], p.numOK[0] }
func (p *parquetRows) millis() (int64, bool)   { return p.ms[1], p.numOK[1] }

// parquetTyped returns a column's value as the number its text would parse to (exactly:
// ParseFloat of appendNumber's shortest digits is the same float64; a DECIMAL's m / 10^scale is
// Clinger's exact case for |m| ≤ 2^53, else ok is false and the text path decides), and its
// unix ms as ParseTime would read them.
func parquetTyped(n parquet.Node) (num func(parquet.Value) (float64, bool), ms func(parquet.Value) int64) {
	lt, kind := parquetType(n)
	switch t := lt.(type) {
	case nil:
	case *format.DecimalType:
		scale := int(t.Scale)
		if scale < 0 || scale >= len(pow10) || (kind != parquet.Int32 && kind != parquet.Int64) {
			return nil, nil
		}
		return func(v parquet.Value) (float64, bool) {
			m := v.Int64()
			if kind == parquet.Int32 {
				m = int64(v.Int32())
			}
			if m > 1<<53 || m < -(1<<53) {
				return 0, false
			}
			return float64(m) / pow10[scale], true
		}, nil
	case *format.TimestampType, *format.DateType:
		conv, err := parquetConverter(n)
		if err != nil {
			return nil, nil
		}
		return nil, func(v parquet.Value) int64 {
			var b [24]byte
			ms, _ := strconv.ParseInt(string(conv(b[:0], v)), 10, 64)
			return ms
		}
	default:
		return nil, nil
	}
	switch kind {
	case parquet.Int32:
		return func(v parquet.Value) (float64, bool) { return float64(v.Int32()), true },
			func(v parquet.Value) int64 { return int64(v.Int32()) }
	case parquet.Int64:
		return func(v parquet.Value) (float64, bool) {
				x := v.Int64()
				return float64(x), x <= 1<<53 && x >= -(1<<53)
			},
			func(v parquet.Value) int64 { return v.Int64() }
	case parquet.Float:
		return func(v parquet.Value) (float64, bool) {
			f := float64(v.Float())
			return f, finite(f)
		}, nil
	case parquet.Double:
		return func(v parquet.Value) (float64, bool) {
			f := v.Double()
			return f, finite(f)
		}, nil
	}
	return nil, nil
}

func (p *parquetRows) closeCursors() {
	for _, c := range p.cur {
		if c != nil {
			c.close()
		}
	}
	p.cur = nil
}

// Close releases the pages being read.
func (p *parquetRows) Close() error {
	p.closeCursors()
	p.closed = true
	return nil
}

// checkPages walks the page headers of a column chunk before parquet-go reads it: the chunk
// must lie inside the file and every page inside the chunk, no larger than parquetMaxPage.
func checkPages(r io.ReaderAt, size int64, md *format.ColumnMetaData) error {
	return walkPages(r, size, md, nil)
}

// walkPages checks the page headers of a column chunk as checkPages says, and calls visit (if
// not nil) with each page's offset, 0-based index, header length and header.
func walkPages(r io.ReaderAt, size int64, md *format.ColumnMetaData, visit func(off int64, i, hlen int, h *format.PageHeader) error) error {
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	end := start + md.TotalCompressedSize
	if start < 4 || md.TotalCompressedSize < 0 || end > size || end < start {
		return fmt.Errorf("chunk at %d of %d bytes is outside the file (%d bytes)", start, md.TotalCompressedSize, size)
	}
	var proto thrift.CompactProtocol
	var buf []byte
	for off, i := start, 0; off < end; i++ {
		// The header is small (statistics make it up to a few KB): read a little, more if
		// it goes on.
		var hlen int
		var err error
		for want := int64(4 << 10); ; want *= 8 {
			n := min(want, end-off)
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, err := r.ReadAt(buf, off); err != nil && err != io.EOF {
				return fmt.Errorf("page header at %d: %w", off, err)
			}
			hlen, err = checkThrift(buf)
			if !errors.Is(err, errThriftShort) || n == end-off || want >= parquetMaxPage {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("page header at %d: %w", off, err)
		}
		var h format.PageHeader
		if err := thrift.NewDecoder(proto.NewReader(bytes.NewReader(buf[:hlen]))).Decode(&h); err != nil {
			return fmt.Errorf("page header at %d: %w", off, err)
		}
		body := end - (off + int64(hlen))
		switch {
		case h.CompressedPageSize < 0 || int64(h.CompressedPageSize) > body:
			return fmt.Errorf("page at %d: %d bytes, past the end of its chunk", off, h.CompressedPageSize)
		case h.CompressedPageSize > parquetMaxPage || h.UncompressedPageSize > parquetMaxPage || h.UncompressedPageSize < 0:
			return fmt.Errorf("page at %d: %d bytes uncompressed (limit %d)", off, h.UncompressedPageSize, parquetMaxPage)
		case pageValues(&h) > parquetMaxPageValues:
			return fmt.Errorf("page at %d: %d values (limit %d)", off, pageValues(&h), parquetMaxPageValues)
		}
		if visit != nil {
			if err := visit(off, i, hlen, &h); err != nil {
				return err
			}
		}
		off += int64(hlen) + int64(h.CompressedPageSize)
	}
	return nil
}

// ErrPageChecksum: a page's bytes do not match the CRC-32 its header holds (a bit flipped on
// disk or on the way). Writers may leave the CRC out (DuckDB does; parquet-go sets it), and
// then a flipped bit in a value goes unseen: the file reads as other numbers.
var ErrPageChecksum = errors.New("page checksum mismatch")

// pageError explains err, the error of reading a page of the column chunk md: when parquet-go
// found a page corrupt and a page's bytes do not match the CRC-32 of its header (the Parquet
// spec's page checksum, over the page as stored: compressed, levels included), the error
// names that page, its kind and its offset, wrapping ErrPageChecksum. The chunk is walked
// again to find it (an error path only: pages are read once otherwise).
func pageError(r io.ReaderAt, size int64, md *format.ColumnMetaData, err error) error {
	if !errors.Is(err, parquet.ErrCorrupted) {
		return err
	}
	var page []byte
	bad := walkPages(r, size, md, func(off int64, i, hlen int, h *format.PageHeader) error {
		if h.CRC == 0 { // not set (a CRC of 0 is indistinguishable, and skipped as parquet-go does)
			return nil
		}
		n := int(h.CompressedPageSize)
		if cap(page) < n {
			page = make([]byte, n)
		}
		page = page[:n]
		if _, err := r.ReadAt(page, off+int64(hlen)); err != nil && err != io.EOF {
			return nil
		}
		if got := crc32.ChecksumIEEE(page); got != uint32(h.CRC) {
			kind := "data page"
			if h.Type == format.DictionaryPage {
				kind = "dictionary page"
			}
			return fmt.Errorf("page %d (%s at byte %d): %w: CRC-32 %08x in its header, %08x of its %d bytes",
				i+1, kind, off, ErrPageChecksum, uint32(h.CRC), got, n)
		}
		return nil
	})
	if errors.Is(bad, ErrPageChecksum) {
		return bad
	}
	return err
}

// parquetMaxPageValues bounds the values of one page (a page of nulls takes a few bytes for
// any count, and the decoder allocates per value). Writers put 20,000 to 200,000 per page.
const parquetMaxPageValues = 4 << 20

func pageValues(h *format.PageHeader) int64 {
	var n int64
	if h.DataPageHeader.Valid {
		n = max(n, int64(h.DataPageHeader.V.NumValues))
	}
	if h.DataPageHeaderV2.Valid {
		v := h.DataPageHeaderV2.V
		n = max(n, int64(v.NumValues), int64(v.NumRows), int64(v.NumNulls))
	}
	if h.DictionaryPageHeader.Valid {
		n = max(n, int64(h.DictionaryPageHeader.V.NumValues))
	}
	return n
}

// checkFooter checks the file's footer (its length, then its Thrift structure: see
// checkThrift) before parquet-go decodes it.
func checkFooter(r io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes: too short for a Parquet file", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil && err != io.EOF {
		return fmt.Errorf("reading the footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return fmt.Errorf("no PAR1 at the end (encrypted or truncated file)")
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 || n > parquetMaxFooter {
		return fmt.Errorf("footer of %d bytes in a file of %d (limit %d)", n, size, parquetMaxFooter)
	}
	footer := make([]byte, n)
	if _, err := r.ReadAt(footer, size-8-n); err != nil && err != io.EOF {
		return fmt.Errorf("reading the footer: %w", err)
	}
	if _, err := checkThrift(footer); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	return nil
}

// parquetMaxFooter bounds the footer (the schema and the row groups' metadata).
const parquetMaxFooter = 64 << 20
