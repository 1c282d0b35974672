package clusterlimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// call is one decision forwarded to an owner. done receives once, when res or err is set
// by whoever takes the call first (its answer, its deadline, its stream's failure; see
// complete). Calls are pooled: one goes back only after its caller received a result (a
// call that failed or whose caller gave up may still be in a queue or a batch in flight,
// and is left to the collector).
//
// A call answered on a stream (callAnswered) holds its batch's slot until its caller
// takes the answer (wait) or gives the call up (abandon): see peer.hold.
type call struct {
	ctx      context.Context
	p        *peer     // set by submit
	deadline int64     // monotonic ns (monoOf): the caller waits no longer
	sent     int64     // unix ns: when its batch left (set by peer.send before it does)
	at       time.Time // when its answer arrived (answer)
	it       item
	res      result
	err      error
	state    atomic.Uint32 // callWaiting, then one of the others, once
	done     chan struct{} // buffered 1: finishing never blocks
}

// States of a call.
const (
	callWaiting   = iota // nobody took it yet
	callDone             // an error, or a POST's answer: it holds no slot
	callAnswered         // a stream's answer: it holds its batch's slot until taken
	callAbandoned        // its caller gave it up before anyone took it
)

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func newCall(ctx context.Context, deadline time.Time, it item) *call {
	c := calls.Get().(*call)
	c.ctx, c.p, c.deadline, c.it, c.res, c.err, c.at = ctx, nil, monoOf(deadline), it, result{}, nil, time.Time{}
	c.state.Store(callWaiting)
	return c
}

// waiting reports whether nobody took the call yet.
func (c *call) waiting() bool { return c.state.Load() == callWaiting }

// complete hands the call its outcome (res, or err when not nil) unless another took it
// first; it reports whether it did.
func (c *call) complete(res *result, err error) bool {
	if !c.state.CompareAndSwap(callWaiting, callDone) {
		return false
	}
	if err != nil {
		c.err = err
	} else {
		c.res = *res
	}
	c.done <- struct{}{}
	return true
}

// answer hands the call its answer res, arrived at at (read once for its whole batch),
// unless another took the call first; it reports whether it did. A call answered with held
// (a stream's: peer.hold) holds its batch's slot until taken.
func (c *call) answer(res *result, at time.Time, held bool) bool {
	state := uint32(callDone)
	if held {
		state = callAnswered
	}
	if !c.state.CompareAndSwap(callWaiting, state) {
		return false
	}
	c.res, c.at = *res, at
	c.done <- struct{}{}
	return true
}

// received accounts for an outcome the caller took from done.
func (c *call) received() {
	if c.state.Load() == callAnswered {
		c.p.taken(1)
	}
}

// abandon gives up a call whose outcome its caller will not take: nobody may take it
// any more, or, when its answer came first, its slot is let go.
func (c *call) abandon() {
	if !c.state.CompareAndSwap(callWaiting, callAbandoned) && c.state.Load() == callAnswered {
		c.p.taken(1)
	}
}

// abandonAll abandons the calls not nil.
func abandonAll(cs []*call) {
	for _, c := range cs {
		if c != nil {
			c.abandon()
		}
	}
}

// epoch anchors the backend's clock: a call's deadline is monotonic nanoseconds since it,
// so that neither a step nor a slew of the wall clock moves one, and a deadline that
// carries a monotonic reading (the Service's: its clock's reading plus the timeout)
// converts without reading the clock. Only what crosses the wire is wall time.
var epoch = time.Now()

// monoOf is t on the backend's clock (a t without a monotonic reading: by its wall time).
func monoOf(t time.Time) int64 { return int64(t.Sub(epoch)) }

// monoNow is the backend's clock: one monotonic read.
func monoNow() int64 { return int64(time.Since(epoch)) }

// errDeadline is the outcome of a call still unanswered at its deadline.
var errDeadline = fmt.Errorf("clusterlimit: the owner did not answer in time: %w", context.DeadlineExceeded)

// release returns a call whose result was received to the pool.
func (c *call) release() {
	c.ctx, c.p, c.it = nil, nil, item{}
	calls.Put(c)
}

// wait waits for c's outcome, or for ctx to end (the caller's own context: its deadline is
// c's, which the peer enforces; the call is then abandoned). Either way c is accounted
// for: the caller must not abandon it after.
func wait(ctx context.Context, c *call) error {
	done := ctx.Done()
	if done == nil { // a context that never ends: no select
		<-c.done
		c.received()
		return c.err
	}
	select {
	case <-c.done:
		c.received()
		return c.err
	case <-done:
		c.abandon()
		return fmt.Errorf("clusterlimit: waiting for the owner: %w", ctx.Err())
	}
}
