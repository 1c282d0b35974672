package batch

import (
	"bytes"
	"fmt"
	"io"
)

const (
	readSize  = 1 << 20  // initial buffer; lines are found inside it without copying
	maxLine   = 64 << 20 // the buffer grows to hold a longer line, up to this
	quoteScan = 1 << 20  // how far one quote search looks ahead
)

// lineBuf hands out the lines of r as slices of its own buffer, valid until the next call:
// one large read per buffer, no allocation per line (bufio.Scanner's job, without its per-call
// overhead, and with the quote index the CSV fast path needs).
type lineBuf struct {
	r      io.Reader
	buf    []byte
	lo, hi int   // unread data is buf[lo:hi]
	eof    bool  // r returned io.EOF
	line   int64 // lines handed out so far (the current line's 1-based number)
	// buf[qfrom:qpos] holds no '"'; buf[qpos] is one, or qpos is hi or a search limit.
	qfrom, qpos int
	mem         bool // buf is the whole input, not owned (maybe read-only memory): never written
	// scanned: buf[lo:scanned] has no '\n' (a long line is searched once, not once per fill).
	scanned int
}

func newLineBuf(r io.Reader) *lineBuf {
	return &lineBuf{r: r, buf: make([]byte, readSize), qpos: -1}
}

// newLineBufData hands out the lines of data, which is the whole input. data is never written
// (it may be a read-only file mapping) and nothing is copied.
func newLineBufData(data []byte) *lineBuf {
	return &lineBuf{r: eofReader{}, buf: data, hi: len(data), eof: true, qpos: -1, mem: true}
}

// next returns the next line without its "\n" or "\r\n" and its start offset in buf, or io.EOF.
func (l *lineBuf) next() ([]byte, int, error) {
	for {
		from := max(l.lo, l.scanned) // buf[lo:scanned] is known to hold no '\n'
		if i := bytes.IndexByte(l.buf[from:l.hi], '\n'); i >= 0 {
			start, end := l.lo, from+i
			l.lo = end + 1
			l.line++
			if end > start && l.buf[end-1] == '\r' {
				end--
			}
			return l.buf[start:end], start, nil
		}
		if l.eof {
			if l.lo == l.hi {
				return nil, 0, io.EOF
			}
			start, end := l.lo, l.hi
			l.lo = l.hi
			l.line++
			if l.buf[end-1] == '\r' {
				end--
			}
			return l.buf[start:end], start, nil
		}
		l.scanned = l.hi
		if err := l.fill(); err != nil {
			return nil, 0, err
		}
	}
}

// fill moves the partial line to the front and reads more, growing the buffer for a line
// longer than it.
func (l *lineBuf) fill() error {
	if l.lo > 0 {
		l.hi = copy(l.buf, l.buf[l.lo:l.hi])
		l.scanned = max(l.scanned-l.lo, 0)
		l.lo = 0
	}
	if l.hi == len(l.buf) {
		if len(l.buf) >= maxLine {
			return ErrLineTooLong
		}
		nb := make([]byte, 2*len(l.buf))
		copy(nb, l.buf[:l.hi])
		l.buf = nb
	}
	l.qfrom, l.qpos = 0, -1
	for tries := 0; ; tries++ {
		n, err := l.r.Read(l.buf[l.hi:])
		l.hi += n
		if err == io.EOF {
			l.eof = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading input: %w", err)
		}
		if n > 0 {
			return nil
		}
		if tries == 100 {
			return fmt.Errorf("reading input: %w", io.ErrNoProgress)
		}
	}
}

// quoted reports whether buf[start:end] (a line just returned) contains a '"'. One IndexByte
// finds the next quote for many lines at once, so quote-free input pays almost nothing.
func (l *lineBuf) quoted(start, end int) bool {
	q := l.quoteFree(start)
	if q >= end {
		return false
	}
	if l.buf[q] == '"' {
		return true
	}
	return bytes.IndexByte(l.buf[q:end], '"') >= 0 // a line longer than one search
}

// quoteFree returns q ≥ from such that buf[from:q] holds no '"' and q is hi, a quote, or at
// least quoteScan/2 bytes ahead. The search is bounded so that a whole input in memory is not
// scanned serially before the parallel workers start.
func (l *lineBuf) quoteFree(from int) int {
	if from < l.qfrom || from > l.qpos ||
		(l.qpos < l.hi && l.buf[l.qpos] != '"' && l.qpos-from < quoteScan/2) {
		lim := min(l.hi, from+quoteScan)
		if j := bytes.IndexByte(l.buf[from:lim], '"'); j >= 0 {
			l.qpos = from + j
		} else {
			l.qpos = lim
		}
		l.qfrom = from
	}
	return l.qpos
}

// rest returns the unread part of the underlying reader (what follows buf[hi:]).
func (l *lineBuf) rest() io.Reader {
	if l.eof {
		return eofReader{}
	}
	return l.r
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
