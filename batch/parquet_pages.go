package batch

import (
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// pqColReader reads one column chunk's values in order, a page at a time.
type pqColReader struct {
	pages parquet.Pages
	page  parquet.Page
	spec  *pqNum
	rg    int
	// explain turns a page read's error into a clearer one (pageError over this chunk).
	explain func(error) error
	// The current page: its definition levels (nil when it has no null), its data (one of
	// the typed slices; with a dictionary, idx indexes it), rows and the next row and value.
	defs   []byte
	maxDef byte
	f64    []float64
	f32    []float32
	i64    []int64
	i32    []int32
	idx    []int32
	rows   int
	pos    int
	vpos   int
	nvals  int
}

func (c *pqColReader) close() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	c.pages.Close()
}

func (c *pqColReader) nextPage() error {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	pg, err := c.pages.ReadPage()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // fewer values than the row group's rows
		} else if c.explain != nil {
			err = c.explain(err)
		}
		return fmt.Errorf("%w: row group %d, column %q: %w", ErrParquet, c.rg, c.spec.name, err)
	}
	c.page = pg
	c.rows, c.pos, c.vpos = int(pg.NumRows()), 0, 0
	c.defs = nil
	if d := pg.DefinitionLevels(); len(d) > 0 && pg.NumNulls() > 0 {
		c.defs, c.maxDef = d, 1
	}
	c.f64, c.f32, c.i64, c.i32, c.idx = nil, nil, nil, nil, nil
	data := pg.Data()
	if dict := pg.Dictionary(); dict != nil {
		c.idx = data.Int32()
		data = dict.Page().Data()
	}
	switch c.spec.kind {
	case parquet.Double:
		c.f64 = data.Double()
		c.nvals = len(c.f64)
	case parquet.Float:
		c.f32 = data.Float()
		c.nvals = len(c.f32)
	case parquet.Int64:
		c.i64 = data.Int64()
		c.nvals = len(c.i64)
	case parquet.Int32:
		c.i32 = data.Int32()
		c.nvals = len(c.i32)
	}
	if c.rows < 0 {
		return fmt.Errorf("%w: row group %d, column %q: page of %d rows", ErrParquet, c.rg, c.spec.name, c.rows)
	}
	return nil
}

// span returns how many of the next k rows of the page are not null (all k, or up to the
// first null) and whether a null follows them, after making sure the page has their values.
func (c *pqColReader) span(k int) (int, bool, error) {
	null := false
	if c.defs != nil {
		for i, d := range c.defs[c.pos : c.pos+k] {
			if d != c.maxDef {
				k, null = i, true
				break
			}
		}
	}
	have := c.nvals
	if c.idx != nil {
		have = len(c.idx)
	}
	if c.vpos+k > have {
		return 0, false, fmt.Errorf("%w: row group %d, column %q: page has %d values for %d rows",
			ErrParquet, c.rg, c.spec.name, have, c.vpos+k)
	}
	return k, null, nil
}

// badIndex is the error of a dictionary index past the dictionary.
func (c *pqColReader) badIndex(x int32) error {
	return fmt.Errorf("%w: row group %d, column %q: dictionary index %d of %d", ErrParquet, c.rg, c.spec.name, x, c.nvals)
}

// floats fills dst with the value column's next rows (row is the file row of dst[0]) and
// returns how many are good; err says what stopped it short (a *RowError for a null or
// non-finite value).
func (c *pqColReader) floats(dst []float64, row int64) (n int, err error) {
	if c == nil {
		return 0, nil
	}
	for n < len(dst) {
		if c.pos == c.rows {
			if err := c.nextPage(); err != nil {
				return n, err
			}
			continue
		}
		k, null, err := c.span(min(len(dst)-n, c.rows-c.pos))
		if err != nil {
			return n, err
		}
		out := dst[n : n+k]
		var bad int
		if c.idx == nil && c.f64 != nil {
			bad = copyFinite(out, c.f64[c.vpos:c.vpos+k])
		} else {
			bad, err = c.convert(out)
			if err != nil {
				return n, err
			}
		}
		if bad < k {
			x, f := c.raw(c.vpos + bad)
			return n + bad, c.valueError(row+int64(n+bad), x, f)
		}
		c.pos += k
		c.vpos += k
		n += k
		if null {
			_, perr := parseValue(nil)
			return n, &RowError{Row: row + int64(n), Line: row + int64(n) + 1, Column: c.spec.name, Err: perr}
		}
	}
	return n, nil
}

// copyFinite copies src to dst up to the first NaN or infinity and returns how many it copied.
func copyFinite(dst, src []float64) int {
	dst = dst[:len(src)]
	for i, v := range src {
		if v-v != 0 {
			return i
		}
		dst[i] = v
	}
	return len(src)
}

// raw returns data value i of the page (through the dictionary), as an int64 or float64.
func (c *pqColReader) raw(i int) (x int64, f float64) {
	if c.idx != nil {
		i = int(c.idx[i])
	}
	switch {
	case c.f64 != nil:
		return 0, c.f64[i]
	case c.f32 != nil:
		return 0, float64(c.f32[i])
	case c.i64 != nil:
		return c.i64[i], 0
	case c.i32 != nil:
		return int64(c.i32[i]), 0
	}
	return 0, 0
}

// convert turns the page's next len(out) values into numbers and returns how many are finite.
// Integers and decimals become what the row-by-row path makes of them: exact conversions
// within ±2^53, the value's text through parseValue beyond.
func (c *pqColReader) convert(out []float64) (int, error) {
	nv := c.nvals
	for i := range out {
		j := c.vpos + i
		if c.idx != nil {
			x := c.idx[j]
			if x < 0 || int(x) >= nv {
				return i, c.badIndex(x)
			}
			j = int(x)
		}
		var v float64
		switch {
		case c.f64 != nil:
			v = c.f64[j]
		case c.f32 != nil:
			v = float64(c.f32[j])
		default:
			var m int64
			if c.i64 != nil {
				m = c.i64[j]
			} else {
				m = int64(c.i32[j])
			}
			var ok bool
			if v, ok = c.spec.exact(m); !ok {
				var err error
				if v, err = parseValue(c.spec.text(nil, m)); err != nil {
					return i, nil
				}
			}
		}
		if v-v != 0 {
			return i, nil
		}
		out[i] = v
	}
	return len(out), nil
}

// exact is m's number when it has an exact one (as parquetTyped).
func (s *pqNum) exact(m int64) (float64, bool) {
	if m > 1<<53 || m < -(1<<53) {
		return 0, false
	}
	if s.scale < 0 {
		return float64(m), true
	}
	if s.scale >= len(pow10) {
		return 0, false
	}
	return float64(m) / pow10[s.scale], true
}

// text appends m's text as parquetConverter writes it.
func (s *pqNum) text(b []byte, m int64) []byte {
	if s.scale < 0 {
		return strconv.AppendInt(b, m, 10)
	}
	return appendDecimal(b, m, s.scale)
}

// valueError is the row error of value x/f (a bad one) at row.
func (c *pqColReader) valueError(row int64, x int64, f float64) error {
	var b []byte
	if c.f64 != nil || c.f32 != nil {
		b = appendNumber(nil, f)
	} else {
		b = c.spec.text(nil, x)
	}
	_, err := parseValue(b)
	if err == nil {
		err = ErrNotFinite
	}
	return &RowError{Row: row, Line: row + 1, Column: c.spec.name, Value: shown(b), Err: err}
}

// millis fills dst with the time column's next rows in unix ms, as millis does (see
// parquetConverter); err says what stopped it short (a null: a *RowError).
func (c *pqColReader) millis(dst []int64, row int64) (n int, err error) {
	for n < len(dst) {
		if c.pos == c.rows {
			if err := c.nextPage(); err != nil {
				return n, err
			}
			continue
		}
		k, null, err := c.span(min(len(dst)-n, c.rows-c.pos))
		if err != nil {
			return n, err
		}
		out := dst[n : n+k]
		s := c.spec
		switch {
		case c.idx == nil && c.i64 != nil && s.per == 1:
			copy(out, c.i64[c.vpos:c.vpos+k])
		default:
			for i := range out {
				j := c.vpos + i
				if c.idx != nil {
					x := c.idx[j]
					if x < 0 || int(x) >= c.nvals {
						return n + i, c.badIndex(x)
					}
					j = int(x)
				}
				var x int64
				if c.i64 != nil {
					x = c.i64[j]
				} else {
					x = int64(c.i32[j])
				}
				switch {
				case s.date:
					x *= 86_400_000
				case s.per > 1:
					ms := x / s.per
					if x%s.per != 0 && x < 0 {
						ms-- // toward the past, as ParseTime truncates RFC 3339
					}
					x = ms
				}
				out[i] = x
			}
		}
		for i, x := range out { // as ParseTime: unix micro- or nanoseconds are not ms
			if x < minMillis || x > maxMillis {
				return n + i, &RowError{Row: row + int64(n+i), Line: row + int64(n+i) + 1, Column: s.name,
					Value: strconv.FormatInt(x, 10), Err: ErrTimeRange}
			}
		}
		c.pos += k
		c.vpos += k
		n += k
		if null {
			_, perr := ParseTime(nil)
			return n, &RowError{Row: row + int64(n), Line: row + int64(n) + 1, Column: s.name, Err: perr}
		}
	}
	return n, nil
}
