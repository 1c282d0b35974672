package clusterlimit

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// peer is the channel to one owner: decisions queue, and at most Backend.inflight batches
// are on the wire at once. A decision that finds a slot free leaves at once, alone; the
// ones that arrive while every slot is busy leave together in the batch the next slot to
// free up sends (a group commit). So a lone decision never waits for a window, and under
// load the round trips, not the decisions, are what the wire carries.
type peer struct {
	b    *Backend
	addr string

	mu       sync.Mutex
	queue    []*call
	inflight int
}

func (b *Backend) peer(addr string) *peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[addr]
	if p == nil {
		p = &peer{b: b, addr: addr}
		b.peers[addr] = p
	}
	return p
}

// submit queues c; if a slot is free the queue leaves now.
func (p *peer) submit(c *call) {
	p.mu.Lock()
	p.queue = append(p.queue, c)
	if p.inflight >= p.b.inflight {
		p.mu.Unlock()
		return
	}
	p.inflight++
	batch := p.takeLocked()
	p.mu.Unlock()
	go p.send(batch)
}

// takeLocked takes up to MaxBatch queued calls whose callers still wait.
func (p *peer) takeLocked() []*call {
	n := min(len(p.queue), MaxBatch)
	batch := p.queue[:n:n]
	p.queue = append([]*call(nil), p.queue[n:]...)
	return batch
}

// send sends batch, then the batches queued meanwhile, until the queue is empty.
func (p *peer) send(batch []*call) {
	for {
		p.roundTrip(batch)
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.inflight--
			p.mu.Unlock()
			return
		}
		batch = p.takeLocked()
		p.mu.Unlock()
	}
}

// roundTrip sends one batch and hands every call its result. Calls whose caller gave up
// before they left are not sent: the owner must not count a decision nobody waits for.
// The round trip's deadline is the latest of its callers'.
func (p *peer) roundTrip(batch []*call) {
	live := batch[:0:0]
	var deadline time.Time
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			c.finished()
			continue
		}
		live = append(live, c)
		if dl, ok := c.ctx.Deadline(); ok && dl.After(deadline) {
			deadline = dl
		}
	}
	if len(live) == 0 {
		return
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	body := appendRequest(make([]byte, 0, 64*len(live)), live)
	ans, err := p.b.g.PostPeer(ctx, "limit", p.addr, Path, body)
	var res []result
	if err == nil {
		res, err = decodeAnswer(ans, len(live))
	}
	if err != nil {
		err = fmt.Errorf("clusterlimit: owner %s: %w", p.addr, err)
	}
	for i, c := range live {
		if err != nil {
			c.err = err
		} else {
			c.res = res[i]
		}
		c.finished()
	}
}
