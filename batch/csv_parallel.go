package batch

import (
	"bytes"
	"io"
	"runtime"
	"runtime/debug"
	"sync"
)

// chunkSize is how much input one parallel chunk holds (whole lines, so a bit more or less).
// A variable so tests can cut inputs into many tiny chunks.
var chunkSize = 1 << 20

// sequentialOnly disables the parallel pipeline (tests compare both paths).
var sequentialOnly = false

// chunk is a run of whole, quote-free lines parsed by a worker.
type chunk struct {
	data   []byte
	off    int // in memory: where data starts in pipeline.data
	vals   []float64
	ivals  []int64 // fixed point: rows [0, fixedN) are in ivals, the rest in vals
	fixedN int
	ts     []int64
	n      int   // rows parsed
	lines  int64 // lines in data
	ok     bool  // the scan took every line: the rows are the whole chunk
	quoted bool  // in memory: data holds a '"' (or a line past lineLimit); the rest of the input is read sequentially
	rest   io.Reader
	err    error
	done   chan struct{} // closed by the worker
}

// pipeline parses a CSV on several cores: a producer cuts the input into chunks at line ends,
// workers scan them, and Read takes their values in input order. Anything unusual keeps the
// sequential reader exact: a chunk that the scan cannot finish (blank line, bad row) is re-read
// sequentially, so errors keep their row and line; the first quote anywhere ends the pipeline
// and the rest of the input goes through the sequential reader (a quoted field may hold a line
// break, so cutting at line ends is no longer safe). Memory is bounded by the chunks in flight:
// about 2 × workers + 2 chunks.
//
// When the whole input is in memory (data; a mapped file), chunks are slices of it: nothing is
// copied, and the workers, not the producer, look for quotes, so the producer's work per chunk
// is one short search for a line end.
type pipeline struct {
	order chan *chunk // every chunk, in input order
	work  chan *chunk
	free  chan *chunk
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup // producer and workers
	size  int            // chunkSize when started
	data  []byte         // the rest of the input, when it is all in memory
	fixed *fixedSpec     // parse values into fixed point (count sum/avg jobs)
}

// startPipeline runs the rest of the input (prefix, then r) through a pipeline, or returns nil
// when one core would do as well. With mem, prefix is the whole rest of the input (r is empty)
// and is never written.
func startPipeline(prefix []byte, r io.Reader, mem bool, vi, ti, ncols int, fixed *fixedSpec) *pipeline {
	workers := runtime.GOMAXPROCS(0)
	if sequentialOnly || workers < 2 {
		return nil
	}
	p := &pipeline{
		order: make(chan *chunk, 2*workers),
		work:  make(chan *chunk, workers),
		free:  make(chan *chunk, 3*workers+2),
		stop:  make(chan struct{}),
		size:  chunkSize,
		fixed: fixed,
	}
	p.wg.Add(1 + workers)
	if mem {
		p.data = prefix
		go p.produceMem()
	} else {
		go p.produce(bytes.Clone(prefix), r)
	}
	for range workers {
		go p.parse(vi, ti, ncols)
	}
	return p
}

// close stops the producer and the workers and waits for them, so that the input memory may
// be released once it returns.
func (p *pipeline) close() {
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}

func (p *pipeline) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

func (p *pipeline) get() *chunk {
	select {
	case ch := <-p.free:
		return ch
	default:
		return &chunk{}
	}
}

func (p *pipeline) put(ch *chunk) {
	select {
	case p.free <- ch:
	default:
	}
}

func (p *pipeline) send(ch *chunk, toWorkers bool) bool {
	select {
	case p.order <- ch:
	case <-p.stop:
		return false
	}
	if !toWorkers {
		return true
	}
	select {
	case p.work <- ch:
		return true
	case <-p.stop:
		return false
	}
}

// produceMem cuts p.data into chunks of about p.size bytes ending at line ends. The line end
// is looked for no further than lineLimit from the start of its line: past that, the rest of
// the input goes to the sequential reader, which reports the line (so a long line is neither
// scanned to its end nor copied).
func (p *pipeline) produceMem() {
	defer p.wg.Done()
	defer close(p.order)
	defer close(p.work)
	data := p.data
	for off := 0; off < len(data); {
		end := len(data)
		if cut := off + p.size; cut < len(data) {
			ls := off + bytes.LastIndexByte(data[off:cut], '\n') + 1 // the start of the line at cut
			if j := bytes.IndexByte(data[cut:min(ls+lineLimit, len(data))], '\n'); j >= 0 {
				end = cut + j + 1
			} else if ls+lineLimit <= len(data) {
				p.send(&chunk{off: off, quoted: true, done: closed}, false)
				return
			}
		}
		ch := p.get()
		ch.data, ch.off, ch.done, ch.quoted = data[off:end:end], off, make(chan struct{}), false
		if !p.send(ch, true) {
			return
		}
		off = end
	}
}

func (p *pipeline) produce(carry []byte, r io.Reader) {
	defer p.wg.Done()
	defer close(p.order)
	defer close(p.work)
	eof := false
	var buf []byte // the chunk's own buffer (chunks from produceMem have none)
	for !eof {
		ch := p.get()
		if cap(ch.data) < 2*p.size {
			buf = make([]byte, 0, 2*p.size)
		} else {
			buf = ch.data
		}
		data := append(buf[:0], carry...)
		for len(data) < p.size && !eof {
			if len(data) == cap(data) {
				data = append(data, 0)[:len(data)]
			}
			n, err := r.Read(data[len(data):cap(data)])
			data = data[:len(data)+n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				p.send(&chunk{err: err, done: closed}, false)
				return
			}
		}
		if eof && len(data) == 0 {
			return
		}
		cut := len(data)
		if !eof {
			cut = bytes.LastIndexByte(data, '\n') + 1
		}
		if cut == 0 || len(data) >= lineLimit || bytes.IndexByte(data, '"') >= 0 {
			// A quote, a line longer than a chunk, or a chunk that might hold a line past the
			// limit (the first one, the line buffer's rest, can be large): the sequential
			// reader takes the rest, and reports such a line.
			p.send(&chunk{rest: io.MultiReader(bytes.NewReader(data), r), done: closed}, false)
			return
		}
		carry = append(carry[:0], data[cut:]...)
		data = data[:cut]
		if data[len(data)-1] != '\n' { // the last line of the input
			data = append(data, '\n')
		}
		ch.data, ch.off, ch.done = data, 0, make(chan struct{})
		if !p.send(ch, true) {
			return
		}
	}
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (p *pipeline) parse(vi, ti, ncols int) {
	defer p.wg.Done()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	for ch := range p.work {
		if p.stopped() {
			close(ch.done)
			continue
		}
		p.parseChunk(ch, vi, ti, ncols)
		close(ch.done)
	}
}

// parseChunk scans one chunk. A fault reading a mapped file that shrank becomes ch.err.
func (p *pipeline) parseChunk(ch *chunk, vi, ti, ncols int) {
	defer func() {
		if e := recover(); e != nil {
			ch.err = faultError(e)
		}
	}()
	data := ch.data
	if p.data != nil && bytes.IndexByte(data, '"') >= 0 {
		ch.quoted = true
		return
	}
	if len(data) > 0 && data[len(data)-1] != '\n' { // the last line of an input in memory
		data = append(data, '\n') // a copy: data's capacity ends at its length
	}
	// Rows are at least two bytes ("1\n"); a typical row is over 16, so start there and grow.
	// A chunk is at most 2 × size but for one holding a long line, which needs one row.
	rows := max(min(len(data), 2*p.size)/16, 64)
	if cap(ch.vals) < rows {
		ch.vals = make([]float64, rows)
	}
	vals := ch.vals[:cap(ch.vals)]
	var ts, ivals []int64
	if ti >= 0 {
		if cap(ch.ts) < len(vals) {
			ch.ts = make([]int64, len(vals))
		}
		ts = ch.ts[:len(vals)]
	}
	n, pos, fixedN := 0, 0, 0
	if p.fixed != nil {
		if cap(ch.ivals) < len(vals) {
			ch.ivals = make([]int64, len(vals))
		}
		ivals = ch.ivals[:len(vals)]
		for {
			k, q, notFixed := scanRowsFixed(data[pos:], vi, ncols, p.fixed, ivals[n:])
			n += k
			pos += q
			if notFixed || n < len(ivals) || pos == len(data) {
				break
			}
			ivals = grow(ivals)
			ch.ivals = ivals
		}
		fixedN = n
		if len(vals) < len(ivals) {
			vals = make([]float64, len(ivals))
			ch.vals = vals
		}
	}
	for pos < len(data) {
		k, q := scanRows(data[pos:], vi, ti, ncols, vals[n:], ts[min(n, len(ts)):])
		n += k
		pos += q
		if n < len(vals) || pos == len(data) {
			break
		}
		vals = grow(vals)
		ch.vals = vals
		if ti >= 0 {
			ts = append(ts, make([]int64, len(vals)-len(ts))...)
			ch.ts = ts
		}
	}
	ch.n, ch.fixedN, ch.ok = n, fixedN, pos == len(data)
	if ch.ok {
		ch.lines = int64(n)
	} else {
		ch.lines = int64(bytes.Count(data, []byte{'\n'}))
	}
}

// grow doubles the length of s (at least), keeping its values.
func grow[T any](s []T) []T {
	s = append(s, make([]T, len(s)+1)...)
	return s[:cap(s)]
}
