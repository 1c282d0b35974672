package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime/debug"
)

// locate returns the file lines of data rows a ≤ b by reading the rows up to b: one
// memchr-speed scan of the mapped file for line ends (a line with a quote goes through the
// CSV record splitter, so multi-line quoted records count as CSVReader counts them).
func (j Job) locate(f *os.File, a, b int64) ([2]int64, error) {
	var out [2]int64
	var l *lineBuf
	if data, unmap, ok := mapFile(f); ok {
		defer unmap()
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if e := recover(); e != nil {
				out = [2]int64{}
			}
		}()
		l = newLineBufData(data)
	} else {
		l = newLineBuf(f)
	}
	format := j.withDefaults().Format
	if format == FormatAuto {
		format = FormatCSV
		if l.mem && looksNDJSON(l.buf) {
			format = FormatNDJSON
		} else if !l.mem {
			return out, errors.New("locate: not a mapped file")
		}
	}
	c := &csvRows{l: l, delim: ','}
	header := format == FormatCSV
	skipTo := a // the next target a bulk skip may run to (once per target)
	for row := int64(-1); row < b; {
		if !header && l.mem && format == FormatCSV && skipTo >= 0 {
			row += skipPlainRows(l, skipTo-row-1)
			if skipTo == a && a != b {
				skipTo = -2 // the skip to b runs once a is found
			} else {
				skipTo = -1
			}
		}
		line, _, err := l.next()
		if err != nil {
			return out, err
		}
		if format == FormatNDJSON {
			if len(trimJSONSpace(line)) == 0 {
				continue
			}
		} else if len(line) == 0 {
			continue
		}
		at := l.line
		if format == FormatCSV && bytes.IndexByte(line, '"') >= 0 {
			if _, err := c.record(line); err != nil {
				return out, err
			}
		}
		if header {
			header = false
			continue
		}
		row++
		if row == a {
			out[0] = at
			if skipTo == -2 {
				skipTo = b
			}
		}
		if row == b {
			out[1] = at
		}
	}
	return out, nil
}

// skipPlainRows skips up to n rows of a mapped CSV, 64 KiB at a time, while the text has no
// quote and no blank line (then every line is a row, and bytes.Count finds them at memory
// speed), and returns how many it skipped; the rest goes line by line.
func skipPlainRows(l *lineBuf, n int64) int64 {
	const chunk = 64 << 10
	var skipped int64
	for l.lo < l.hi {
		end := min(l.lo+chunk, l.hi)
		if k := bytes.LastIndexByte(l.buf[l.lo:end], '\n'); k >= 0 {
			end = l.lo + k + 1 // whole lines
		} else {
			return skipped
		}
		p := l.buf[l.lo:end]
		if p[0] == '\n' || p[0] == '\r' || bytes.IndexByte(p, '"') >= 0 || hasBlankLine(p) {
			return skipped
		}
		lines := int64(bytes.Count(p, []byte{'\n'}))
		if skipped+lines > n {
			return skipped
		}
		skipped += lines
		l.line += lines
		l.lo = end
	}
	return skipped
}

// hasBlankLine reports whether p has a '\n' followed by '\n' or '\r' (a line that CSVReader
// skips as blank), eight bytes at a time with exact byte masks.
func hasBlankLine(p []byte) bool {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	eq := func(w uint64, c byte) uint64 { // 0x80 in every byte of w equal to c, exactly
		t := w ^ (ones * uint64(c))
		return ^(((t &^ high) + ^uint64(high)) | t | ^uint64(high))
	}
	i := 0
	for ; i+9 <= len(p); i += 8 {
		w := binary.LittleEndian.Uint64(p[i:])
		next := binary.LittleEndian.Uint64(p[i+1:])
		if eq(w, '\n')&(eq(next, '\n')|eq(next, '\r')) != 0 {
			return true
		}
	}
	for ; i+1 < len(p); i++ {
		if p[i] == '\n' && (p[i+1] == '\n' || p[i+1] == '\r') {
			return true
		}
	}
	return false
}
