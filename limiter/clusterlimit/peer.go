package clusterlimit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slide-metrics/slide/cluster"
)

// peer is the channel to one owner: decisions queue, and at most Backend.inflight batches
// are on the wire at once, the second only behind a small batch (smallBatch). A decision
// that finds a slot free leaves at once; the ones that arrive while every slot is busy
// leave together in the batch the next slot to free up sends (a group commit). So a lone
// decision never waits for a window, and under load the round trips, not the decisions,
// are what the wire carries. Batches go as frames over one stream per owner (stream.go),
// or as POSTs to an owner that serves no streams.
//
// A batch answered on a stream frees its slot only once each of its callers took its
// answer (hold): the callers that decide again at once (a busy caller: a request loop, a
// server's next request) then join the next batch instead of the one after it, so under
// load one frame carries nearly every caller in flight (BenchmarkClusterDecision: ~120
// decisions a frame against ~65 when the queue left as soon as the answer was read). The
// wait is for callers already runnable, never for a timer or for a caller to come back.
type peer struct {
	b    *Backend
	addr string
	idx  int // in peers.list

	mu        sync.Mutex
	queue     []*call
	inflight  int         // batches taken from the queue and not yet answered
	st        *stream     // nil: none open
	postUntil time.Time   // until then the owner is asked by POST (it refused a stream)
	qtimer    *time.Timer // ends the wait of queued calls at their deadline
	qAt       int64       // when qtimer fires (monoOf), 0: not armed
	lastBatch int         // the decisions of the last batch taken from the queue
	held      int         // slots of batches answered, freed once untaken is 0

	dialMu sync.Mutex // one dial at a time

	_       [64]byte     // untaken, which every caller counts down, off mu's cache line
	untaken atomic.Int64 // answers of held batches not yet taken by their callers
}

// peers are the channels to the owners, by address and by index (a decision's route,
// Backend.DecideLocal). Copied on write: a new owner is rare.
type peers struct {
	byAddr map[string]*peer
	list   []*peer // each peer at its idx
}

// peer returns the channel to addr. A decision finds its peer without a lock.
func (b *Backend) peer(addr string) *peer {
	if p := b.peers.Load().byAddr[addr]; p != nil {
		return p
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := b.peers.Load()
	if p := ps.byAddr[addr]; p != nil {
		return p
	}
	p := &peer{b: b, addr: addr, idx: len(ps.list)}
	next := &peers{byAddr: make(map[string]*peer, len(ps.byAddr)+1), list: append(slices.Clip(ps.list), p)}
	maps.Copy(next.byAddr, ps.byAddr)
	next.byAddr[addr] = p
	b.peers.Store(next)
	return p
}

// peerCache holds the channel to the owner each partition was last found at, by partition
// (modulo its size: a collision only sends the next decision to the map).
type peerCache [64]atomic.Pointer[peer]

// peerOf is peer(addr) for addr, the owner of partition p: the channel p's owner was last
// found at when it is still addr's (a compare of the group view's string, mostly its same
// bytes), so that a forwarded decision hashes no address.
func (b *Backend) peerOf(p int32, addr string) *peer {
	slot := &b.byPart[uint32(p)%uint32(len(b.byPart))]
	if pe := slot.Load(); pe != nil && pe.addr == addr {
		return pe
	}
	pe := b.peer(addr)
	slot.Store(pe)
	return pe
}

// smallBatch is the most decisions a batch in flight may carry for the next decision to
// leave at once in another slot: a few callers (moderate load) each keep one round trip's
// latency, while behind a larger batch (load) the next decisions wait and gather into one
// frame instead of a small one in every slot.
const smallBatch = 8

// submit queues c; if a slot is free the queue leaves now (a second slot only behind a
// small batch: smallBatch).
func (p *peer) submit(c *call) {
	c.p = p
	p.mu.Lock()
	p.queue = append(p.queue, c)
	if p.inflight >= p.b.inflight || p.inflight > 0 && p.lastBatch > smallBatch {
		if p.qAt == 0 || c.deadline < p.qAt {
			p.armLocked(c.deadline)
		}
		p.mu.Unlock()
		return
	}
	p.inflight++
	batch := p.takeLocked()
	p.mu.Unlock()
	go p.send(batch)
}

// armLocked sets the queue's timer to fire at at (monoOf).
func (p *peer) armLocked(at int64) {
	p.qAt = at
	d := time.Duration(at - monoNow())
	if p.qtimer == nil {
		p.qtimer = time.AfterFunc(d, p.expireQueue)
	} else {
		p.qtimer.Reset(d)
	}
}

// expireQueue ends the wait of the queued calls past their deadline (they stay queued,
// taken, and are not sent), and sets the timer for the next.
func (p *peer) expireQueue() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := monoNow()
	var next int64
	for _, c := range p.queue {
		switch {
		case c.deadline <= now:
			c.complete(nil, errDeadline)
		case c.waiting() && (next == 0 || c.deadline < next):
			next = c.deadline
		}
	}
	p.qAt = 0
	if next != 0 {
		p.armLocked(next)
	}
}

// takeLocked takes up to MaxBatch queued calls. The queue starts again with room for as
// many: the next batch is likely as large, and grows without copying.
func (p *peer) takeLocked() []*call {
	n := min(len(p.queue), MaxBatch)
	p.lastBatch = n
	batch := p.queue[:n:n]
	p.queue = append(make([]*call, 0, max(n, len(p.queue)-n)), p.queue[n:]...)
	return batch
}

// hold holds the slot of a batch of n calls about to be answered (answer): it is freed
// once each call that took its answer (callAnswered) is taken or abandoned, and its
// caller reports the rest (taken).
func (p *peer) hold(n int) {
	p.untaken.Add(int64(n)) // first: the takers of an earlier batch cannot see 0 before held counts this one
	p.mu.Lock()
	p.held++
	p.mu.Unlock()
}

// taken accounts for n answers of held batches taken (or never given): when none is left
// untaken, the held slots are freed. Each caller reports its own answer: only the last
// takes the lock.
func (p *peer) taken(n int) {
	if p.untaken.Add(-int64(n)) != 0 {
		return
	}
	p.mu.Lock()
	if p.untaken.Load() != 0 || p.held == 0 { // a batch answered since holds them on
		p.mu.Unlock()
		return
	}
	held := p.held
	p.held = 0
	p.mu.Unlock()
	for range held {
		p.done()
	}
}

// done frees the slot of a batch answered (or failed): the queue leaves in it, if any.
func (p *peer) done() {
	p.mu.Lock()
	if len(p.queue) == 0 {
		p.inflight--
		p.mu.Unlock()
		return
	}
	batch := p.takeLocked()
	p.mu.Unlock()
	go p.send(batch)
}

// send sends one batch. Calls whose caller gave up (or whose deadline passed) before they
// left are not sent: the owner must not count a decision nobody waits for. The batch's
// deadline is the latest of its callers'.
func (p *peer) send(batch []*call) {
	live := batch[:0]
	start := time.Now() // one read: the batch's wall time (sent), and monotonic (now)
	now, wall := monoOf(start), start.UnixNano()
	var latest int64
	for _, c := range batch {
		switch {
		case !c.waiting():
			continue // its deadline passed in the queue
		case c.ctx.Err() != nil:
			c.complete(nil, c.ctx.Err())
			continue
		case c.deadline <= now:
			c.complete(nil, errDeadline)
			continue
		}
		c.sent = wall
		live = append(live, c)
		latest = max(latest, c.deadline)
	}
	if len(live) == 0 {
		p.done()
		return
	}
	deadline := start.Add(time.Duration(latest - now)) // its wall part the present's, for the wire
	st, err := p.stream(deadline)
	switch {
	case err == nil:
		st.send(live, deadline, start) // done when answered
		return
	case errors.Is(err, cluster.ErrNoStream):
		p.roundTrip(live, deadline)
	default:
		p.b.g.ObservePeer("limit", err, time.Since(start))
		failAll(live, fmt.Errorf("clusterlimit: owner %s: %w", p.addr, err))
	}
	p.done()
}

// roundTrip sends one batch as a POST and hands every call its result.
func (p *peer) roundTrip(live []*call, deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	body := appendRequest(make([]byte, 0, 64*len(live)), live)
	p.b.sent.Add(1)
	ans, err := p.b.g.PostPeer(ctx, "limit", p.addr, Path, body)
	var res []result
	if err == nil {
		res, err = decodeAnswer(ans, len(live))
	}
	if err != nil {
		failAll(live, fmt.Errorf("clusterlimit: owner %s: %w", p.addr, err))
		return
	}
	at := time.Now()
	for i, c := range live {
		c.answer(&res[i], at, false) // the slot is freed by send, not held
	}
}
