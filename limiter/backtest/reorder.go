package backtest

import (
	"container/heap"
	"fmt"
	"time"
)

// Reorder hands requests on in time order when the log is out of order by at most Within:
// an access log written as requests end (Envoy's, nginx's) is stamped with their starts, so a
// slow request's line comes after faster ones that started later. Each request is held
// until one Within later than it has been read, then handed on, the earliest first (equal
// times in the log's order). A request earlier than one already handed on is ErrUnsorted,
// naming its line and how far back it is. Memory is the requests of the last Within of the
// log. Not safe for concurrent use.
type Reorder struct {
	within   time.Duration
	next     func(Request) error
	held     heldRequests
	seq      int64
	latest   time.Time // the latest time read
	released time.Time // the time of the last request handed on
	any      bool      // a request was handed on
}

// NewReorder returns a Reorder of requests out of order by at most within, handing them to
// next. Call Flush after the last Add.
func NewReorder(within time.Duration, next func(Request) error) *Reorder {
	return &Reorder{within: within, next: next}
}

// Add reads one request: it hands on every held request Within or more before the latest
// read, in time order, and returns next's first error or ErrUnsorted.
func (o *Reorder) Add(req Request) error {
	if o.any && req.Time.Before(o.released) {
		return fmt.Errorf("%s: %w (%s is %s before %s, a request read earlier: more than the reorder window %s)", where(req), ErrUnsorted,
			req.Time.UTC().Format(time.RFC3339Nano), o.latest.Sub(req.Time), o.latest.UTC().Format(time.RFC3339Nano), o.within)
	}
	heap.Push(&o.held, held{req, o.seq})
	o.seq++
	if req.Time.After(o.latest) {
		o.latest = req.Time
	}
	until := o.latest.Add(-o.within)
	for len(o.held) > 0 && !o.held[0].Time.After(until) {
		if err := o.pop(); err != nil {
			return err
		}
	}
	return nil
}

// Flush hands on every request still held, in time order.
func (o *Reorder) Flush() error {
	for len(o.held) > 0 {
		if err := o.pop(); err != nil {
			return err
		}
	}
	return nil
}

func (o *Reorder) pop() error {
	h := heap.Pop(&o.held).(held)
	o.released, o.any = h.Time, true
	return o.next(h.Request)
}

// held is a request and its place in the log, which orders equal times.
type held struct {
	Request
	seq int64
}

// heldRequests is a min-heap by time, then place in the log.
type heldRequests []held

func (h heldRequests) Len() int { return len(h) }
func (h heldRequests) Less(i, j int) bool {
	if !h[i].Time.Equal(h[j].Time) {
		return h[i].Time.Before(h[j].Time)
	}
	return h[i].seq < h[j].seq
}
func (h heldRequests) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *heldRequests) Push(x any)   { *h = append(*h, x.(held)) }
func (h *heldRequests) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = held{}
	*h = old[:len(old)-1]
	return x
}
