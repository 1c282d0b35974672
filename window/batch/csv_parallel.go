package batch

import (
	"bytes"
	"io"
	"runtime"
	"sync"
)

// chunkSize is how much input one parallel chunk holds (whole lines, so a bit more or less).
// A variable so tests can cut inputs into many tiny chunks.
var chunkSize = 1 << 20

// sequentialOnly disables the parallel pipeline (tests compare both paths).
var sequentialOnly = false

// chunk is a run of whole, quote-free lines parsed by a worker.
type chunk struct {
	data  []byte
	vals  []float64
	ts    []int64
	n     int   // rows parsed
	lines int64 // lines in data
	ok    bool  // scanRows took every line: vals[:n] is the whole chunk
	rest  io.Reader
	err   error
	done  chan struct{} // closed by the worker
}

// pipeline parses a CSV on several cores: a producer cuts the input into chunks at line ends,
// workers run scanRows on them, and Read takes their values in input order. Anything unusual
// keeps the sequential reader exact: a chunk that scanRows cannot finish (blank line, bad row)
// is re-read sequentially, so errors keep their row and line; the first quote anywhere ends the
// pipeline and the rest of the input goes through the sequential reader (a quoted field may
// hold a line break, so cutting at line ends is no longer safe). Memory is bounded by the
// chunks in flight: about 2 × workers + 2 chunks.
type pipeline struct {
	order chan *chunk // every chunk, in input order
	work  chan *chunk
	free  chan *chunk
	stop  chan struct{}
	once  sync.Once
	size  int // chunkSize when started
}

// startPipeline runs the rest of the input (prefix, then r) through a pipeline, or returns nil
// when one core would do as well.
func startPipeline(prefix []byte, r io.Reader, vi, ti, ncols int) *pipeline {
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
	}
	go p.produce(bytes.Clone(prefix), r)
	for range workers {
		go p.parse(vi, ti, ncols)
	}
	return p
}

// close stops the producer and the workers (they exit once they see it).
func (p *pipeline) close() { p.once.Do(func() { close(p.stop) }) }

func (p *pipeline) get() *chunk {
	select {
	case ch := <-p.free:
		return ch
	default:
		return &chunk{data: make([]byte, 0, 2*p.size)}
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

func (p *pipeline) produce(carry []byte, r io.Reader) {
	defer close(p.order)
	defer close(p.work)
	eof := false
	for !eof {
		ch := p.get()
		data := append(ch.data[:0], carry...)
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
		if cut == 0 || bytes.IndexByte(data, '"') >= 0 {
			// A quote, or a line longer than a chunk: the sequential reader takes the rest.
			p.send(&chunk{rest: io.MultiReader(bytes.NewReader(data), r), done: closed}, false)
			return
		}
		carry = append(carry[:0], data[cut:]...)
		data = data[:cut]
		if data[len(data)-1] != '\n' { // the last line of the input
			data = append(data, '\n')
		}
		ch.data, ch.lines, ch.done = data, int64(bytes.Count(data, []byte{'\n'})), make(chan struct{})
		if !p.send(ch, true) {
			return
		}
	}
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (p *pipeline) parse(vi, ti, ncols int) {
	for ch := range p.work {
		rows := int(ch.lines)
		if cap(ch.vals) < rows {
			ch.vals = make([]float64, rows)
		}
		var ts []int64
		if ti >= 0 {
			if cap(ch.ts) < rows {
				ch.ts = make([]int64, rows)
			}
			ts = ch.ts[:rows]
		}
		n, pos := scanRows(ch.data, vi, ti, ncols, ch.vals[:rows], ts)
		ch.n, ch.ok = n, pos == len(ch.data)
		close(ch.done)
	}
}
