package batch

import (
	"bytes"
	"fmt"
	"io"
)

// readSize is the initial buffer; lines are found inside it without copying.
const readSize = 1 << 20

// The readers' bounds (see the package doc), checked while reading, before anything is
// buffered past them: a line (with its "\n") and a quoted record of several lines at most
// lineLimit bytes; a CSV header at most headerLimit bytes and columnLimit columns, which also
// bounds the fields a row is split into and the keys of NDJSON's first object. quoteScan is
// how far one quote search looks ahead. Variables only so that tests can shrink them;
// lineLimit must stay above quoteScan and 2 × chunkSize (the sequential fast paths take rows
// from at most quoteScan bytes, a parsed chunk is at most 2 × chunkSize or it goes to the
// sequential reader, so neither can hold a line past the limit).
var (
	lineLimit   = 64 << 20
	headerLimit = 4 << 20
	columnLimit = 1 << 16
	quoteScan   = 1 << 20
)

// headerTooLarge is the error of a header past headerLimit bytes or columnLimit columns.
func headerTooLarge(line int64, what string) error {
	if what != "" {
		what = ": " + what
	}
	return fmt.Errorf("line %d: %w%s (limits %s and %d columns)", line, ErrHeaderTooLarge,
		what, sizeText(headerLimit), columnLimit)
}

// sizeText is n bytes in MiB or KiB when it is a whole number of them.
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

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
	// max bounds a line: its '\n' must come within max bytes of its start (lineLimit, or
	// headerLimit while a header is read). A longer one is an error, found without reading
	// (or, in memory, looking) further than that.
	max    int
	header bool // a header is being read: the limit is headerLimit
}

// readHeader sets the bounds of a header (on) or of the rows after it (off).
func (l *lineBuf) readHeader(on bool) {
	l.header, l.max = on, lineLimit
	if on {
		l.max = headerLimit
	}
}

// tooLong is the error of a line, or of a quoted record, starting on line that reached max
// bytes: what a reader returns instead of buffering more.
func (l *lineBuf) tooLong(line int64, record bool) error {
	what := ""
	if record {
		what = "a quoted record"
	}
	if l.header {
		return headerTooLarge(line, what)
	}
	if what != "" {
		what = ": " + what
	}
	return fmt.Errorf("line %d: %w%s (limit %s)", line, ErrLineTooLong, what, sizeText(l.max))
}

func newLineBuf(r io.Reader) *lineBuf {
	return &lineBuf{r: r, buf: make([]byte, readSize), qpos: -1, max: lineLimit}
}

// newLineBufData hands out the lines of data, which is the whole input. data is never written
// (it may be a read-only file mapping) and nothing is copied.
func newLineBufData(data []byte) *lineBuf {
	return &lineBuf{r: eofReader{}, buf: data, hi: len(data), eof: true, qpos: -1, mem: true, max: lineLimit}
}

// next returns the next line without its "\n" or "\r\n" and its start offset in buf, or io.EOF.
// A line of max bytes or more (without its "\n") is an error wrapping ErrLineTooLong.
func (l *lineBuf) next() ([]byte, int, error) {
	for {
		lim := min(l.hi, l.lo+l.max)           // the '\n' must be in buf[lo:lo+max]
		from := min(max(l.lo, l.scanned), lim) // buf[lo:scanned] is known to hold no '\n'
		if i := bytes.IndexByte(l.buf[from:lim], '\n'); i >= 0 {
			start, end := l.lo, from+i
			l.lo = end + 1
			l.line++
			if end > start && l.buf[end-1] == '\r' {
				end--
			}
			return l.buf[start:end], start, nil
		}
		if lim-l.lo >= l.max {
			return nil, 0, l.tooLong(l.line+1, false)
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

// fill moves the partial line to the front and reads more, growing the buffer (up to max) for
// a line longer than it. next calls it only while the partial line is shorter than max.
func (l *lineBuf) fill() error {
	if l.lo > 0 {
		l.hi = copy(l.buf, l.buf[l.lo:l.hi])
		l.scanned = max(l.scanned-l.lo, 0)
		l.lo = 0
	}
	if l.hi == len(l.buf) {
		if l.hi >= l.max {
			return l.tooLong(l.line+1, false)
		}
		nb := make([]byte, min(2*len(l.buf), l.max))
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

// record returns the CSV record that starts with line (just returned by next) appended to buf:
// line, and while a quoted field is open the lines after it, joined by '\n'. Each line is
// scanned once for quotes (quoteOpen), so a record of many lines costs its length, not its
// length times its lines. A record of max bytes or more is an error naming the line it
// starts on.
func (l *lineBuf) record(buf, line []byte, delim byte) ([]byte, error) {
	at := l.line
	buf = append(buf, line...)
	for open := quoteOpen(line, false, delim); open; open = quoteOpen(line, true, delim) {
		var err error
		if line, _, err = l.next(); err == io.EOF {
			return buf, fmt.Errorf("%w: unterminated quoted field", ErrSyntax)
		} else if err != nil {
			return buf, err
		}
		if len(buf)+1+len(line) >= l.max {
			return buf, l.tooLong(at, true)
		}
		buf = append(append(buf, '\n'), line...)
	}
	return buf, nil
}

// quoteOpen reports whether a quoted field is still open at the end of line, a line of a CSV
// record starting inside one (open) or at a field's start. The dialect is the splitters': a
// quote opens a field only as its first byte, "" inside one is a quote, and text after the
// closing quote belongs to the field up to the delimiter.
func quoteOpen(line []byte, open bool, delim byte) bool {
	i := 0
	if !open && len(line) > 0 && line[0] == '"' {
		open, i = true, 1
	}
	for {
		for open { // find the closing quote
			j := bytes.IndexByte(line[i:], '"')
			if j < 0 {
				return true
			}
			i += j + 1
			if i < len(line) && line[i] == '"' {
				i++ // an escaped quote
				continue
			}
			open = false
		}
		j := bytes.IndexByte(line[i:], delim)
		if j < 0 {
			return false
		}
		i += j + 1
		if i < len(line) && line[i] == '"' {
			open, i = true, i+1
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
