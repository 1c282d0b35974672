package redislimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/limiter"
)

// DefaultPipelines is the default of Config.Pipelines.
const DefaultPipelines = 1

// maxBatchScript bounds the decisions of one fixed_window_batch call, so one
// call stays short (Redis runs a script to its end before anything else).
const maxBatchScript = 128

// batchScript decides several fixed-window requests in one call (one TIME,
// one script run): see scripts/fixed_window_batch.lua.
var batchScript = loadScript("fixed_window_batch")

// BatchScript returns the script that decides several fixed-window requests
// of a single redis-server in one call.
func BatchScript() *Script { return batchScript }

// job is one Decide call waiting in the coalescer. Its results are its own
// (res), copied to the caller's out only by the caller once done is closed, so a
// caller that gave up never races the flusher.
type job struct {
	ctx   context.Context
	reqs  []limiter.BackendRequest
	res   []limiter.Decision
	err   error
	state atomic.Int32 // jobQueued → jobSent, or jobQueued → jobAbandoned by its caller
	done  chan struct{}
}

const (
	jobQueued int32 = iota
	jobSent
	jobAbandoned
)

// coalescer gathers concurrent Decide calls of fixed-window requests into
// shared round trips on a single server: while max calls are in flight, new
// ones queue, and the next flush decides all of them in one fixed_window_batch
// call. There is no timer: a call that finds a slot free is sent at once, so a
// lone caller waits one round trip, as without it. A flush is one command
// (one script call), not a go-redis pipeline.
type coalescer struct {
	b        *Backend
	max      int
	mu       sync.Mutex
	queue    []*job
	inflight int
}

// decide queues reqs and waits for their decisions or for ctx to end.
func (q *coalescer) decide(ctx context.Context, reqs []limiter.BackendRequest, out []limiter.Decision) error {
	// The job keeps its own copy of reqs: a caller that gave up may reuse its slice.
	j := &job{ctx: ctx, reqs: append([]limiter.BackendRequest(nil), reqs...), res: make([]limiter.Decision, len(reqs)), done: make(chan struct{})}
	q.mu.Lock()
	q.queue = append(q.queue, j)
	var batch []*job
	if q.inflight < q.max {
		q.inflight++
		batch = q.queue
		q.queue = nil
	}
	q.mu.Unlock()
	if batch != nil {
		go q.flushFrom(batch)
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return fmt.Errorf("running fixed_window script: %w", ctx.Err()) // never sent: nothing was counted
		}
		<-j.done // sent: its answer is at most a timeout away (the batch's deadline)
	}
	copy(out, j.res)
	return j.err
}

func validPolicies(reqs []limiter.BackendRequest) error {
	for i := range reqs {
		if p := reqs[i].Policy; p == nil || p.Algorithm < limiter.FixedWindow || p.Algorithm > limiter.LeakyBucket {
			return errors.New("deciding: request without a valid policy")
		}
	}
	return nil
}

// flushFrom sends batch, then whatever queued meanwhile, until the queue is
// empty; it holds one of the max pipeline slots throughout.
func (q *coalescer) flushFrom(batch []*job) {
	for {
		q.b.flush(batch)
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.inflight--
			q.mu.Unlock()
			return
		}
		batch = q.queue
		q.queue = nil
		q.mu.Unlock()
	}
}

// flush decides the live jobs of batch, fixed-window requests only, in
// fixed_window_batch calls of up to maxBatchScript requests, and closes their done.
func (b *Backend) flush(batch []*job) {
	live := batch[:0:0]
	var deadline time.Time
	n := 0
	for _, j := range batch {
		if !j.state.CompareAndSwap(jobQueued, jobSent) {
			close(j.done) // abandoned: its caller has returned
			continue
		}
		live = append(live, j)
		n += len(j.reqs)
		if d, ok := j.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	// The latest deadline bounds the round trip: each caller waits only its own.
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	flat := make([]*limiter.BackendRequest, 0, n)
	for _, j := range live {
		for i := range j.reqs {
			flat = append(flat, &j.reqs[i])
		}
	}
	res := make([]limiter.Decision, n)
	errs := make([]error, n)
	for start := 0; start < n; start += maxBatchScript {
		end := min(start+maxBatchScript, n)
		b.decideFixed(ctx, flat[start:end], res[start:end], errs[start:end])
	}
	i, failed := 0, false
	for _, j := range live {
		for k := range j.reqs {
			if errs[i] != nil && j.err == nil {
				j.err = errs[i]
			}
			j.res[k] = res[i]
			i++
		}
		failed = failed || j.err != nil
		close(j.done)
	}
	if failed {
		b.failed()
	}
}

// allFixed reports whether every request is a fixed window's.
func allFixed(reqs []limiter.BackendRequest) bool {
	for i := range reqs {
		if reqs[i].Policy.Algorithm != limiter.FixedWindow || reqs[i].Policy.Levels.N > 0 {
			return false
		}
	}
	return true
}

// decodeInts reads a script's reply of len(v) integers into v.
func decodeInts(cmd *goredis.Cmd, v []int64) error {
	raw, err := cmd.Slice()
	if err != nil {
		return err
	}
	if len(raw) != len(v) {
		return fmt.Errorf("got %d values, want %d", len(raw), len(v))
	}
	for i, x := range raw {
		n, ok := x.(int64)
		if !ok {
			return fmt.Errorf("value %d is %T, want an integer", i, x)
		}
		v[i] = n
	}
	return nil
}
