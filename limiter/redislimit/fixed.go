package redislimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/window"
)

// The fixed window, one counter per window (scripts/fixed_window.lua and
// fixed_window_batch.lua). The script touches only the keys it is given, as
// Redis's scripting rules want (and Cluster checks), so the caller names the
// window: from its own clock with Config.ClientClock, otherwise from its
// estimate of Redis's clock (its own plus the difference the last reply
// showed). The script checks the name against TIME and, when they differ (a
// call at a window's edge, or a skewed clock), touches nothing and answers
// TIME; the caller then asks again for the window of that time. The script
// returns only the count, and the decision is made from it here: a smaller
// script and reply than one computing remaining, retry and reset in Lua.

// maxWindowTries bounds the calls one decision makes when its named window is
// not Redis's: the second names the window of Redis's own answer, so a third
// is needed only when a window ends between two round trips.
const maxWindowTries = 3

// errWindowRace is returned when every try named a window Redis had left.
var errWindowRace = errors.New("the fixed window ended during every try (windows shorter than a round trip?)")

// fixedWin is the window a fixed-window call names: [start, end) in µs.
type fixedWin struct{ start, end int64 }

// windowAt returns the fixed window of p holding now (µs).
func windowAt(p *limiter.Policy, now int64) fixedWin {
	if p.Calendar != 0 {
		// A calendar period of the policy's zone (limiter.Calendar.Bounds; the memory
		// backend caches the current one, a zone conversion is nothing beside a round trip).
		start, end := p.Calendar.Bounds(p.Location, now*1000)
		return fixedWin{start: start / 1000, end: end / 1000}
	}
	w := p.Window.Microseconds()
	start := window.FloorDiv(now, w) * w
	return fixedWin{start: start, end: start + w}
}

// redisNow is the estimate of Redis's clock in µs: the local clock plus the
// difference the last reply showed (Redis's TIME minus the local time the
// call was sent, so the estimate is of TIME when a call arrives).
func (b *Backend) redisNow() int64 { return time.Now().UnixMicro() + b.skew.Load() }

// observe records Redis's TIME from a reply to a call sent at sent (µs),
// storing the new difference only when it moved by over a millisecond, so
// concurrent callers rarely write the shared word.
func (b *Backend) observe(redisTime, sent int64) {
	if redisTime <= 0 {
		return
	}
	d := redisTime - sent
	if old := b.skew.Load(); d-old > 1000 || old-d > 1000 {
		b.skew.Store(d)
	}
}

// fixedKey is the counter of p's window win for key: Key + ":" + window number.
func (b *Backend) fixedKey(p *limiter.Policy, key string, win fixedWin) string {
	base := b.Key(p, key)
	buf := make([]byte, 0, len(base)+21)
	buf = append(buf, base...)
	buf = append(buf, ':')
	if p.Calendar != 0 {
		// A calendar period is named by its start, in seconds since the epoch, after a
		// "c" (window numbers count windows, never that many).
		buf = append(buf, 'c')
		buf = strconv.AppendInt(buf, win.start/1e6, 10)
		return string(buf)
	}
	buf = strconv.AppendInt(buf, win.start/p.Window.Microseconds(), 10)
	return string(buf)
}

// fixedNow is the time (µs) a fixed-window call for r names its window from.
func (b *Backend) fixedNow(r *limiter.BackendRequest) int64 {
	if b.client {
		return r.Now.UnixMicro()
	}
	return b.redisNow()
}

// fixedDecision is the Decision of a fixed-window count n (after charging
// cost; for a peek, the count) in window win at now (µs), as fixedWindow.take
// in package limiter decides.
func fixedDecision(p *limiter.Policy, cost, n, now int64, win fixedWin) limiter.Decision {
	limit, left := p.Limit, time.Duration(win.end-now)*time.Microsecond
	d := limiter.Decision{Limit: p.Quota(), Window: p.QuotaWindow(), Policy: p.Name}
	if p.Calendar != 0 {
		d.Window = time.Duration(win.end-win.start) * time.Microsecond
	}
	switch {
	case cost == 0 && n+1 > limit:
		d.Remaining, d.RetryAfter, d.ResetAfter = limit-n, left, left
	case cost == 0:
		d.Allowed, d.Remaining = true, limit-n
		if n > 0 {
			d.ResetAfter = left
		}
	case n > limit: // denied and taken back: the count was n - cost
		d.Remaining, d.RetryAfter = limit-n+cost, left
		if n > cost {
			d.ResetAfter = left
		}
	default:
		d.Allowed, d.Remaining, d.ResetAfter = true, limit-n, left
	}
	d.Remaining = max(d.Remaining, 0)
	return d
}

// fixedArgs returns the KEYS and ARGV of one fixed_window call for r naming
// the window of now (µs), and that window.
func (b *Backend) fixedArgs(r *limiter.BackendRequest, now int64) ([]string, []any, fixedWin) {
	win := windowAt(r.Policy, now)
	arg := any("") // Redis TIME
	if b.client {
		arg = now
	}
	return []string{b.fixedKey(r.Policy, r.Key, win)}, []any{arg, r.Cost, b.prepare(r.Policy).static[0], win.start, win.end}, win
}

// fixedReply decodes a fixed_window reply to a call for r naming win, sent
// at sent (µs): the decision, or ok false and Redis's time when Redis is in
// another window.
func (b *Backend) fixedReply(r *limiter.BackendRequest, cmd *goredis.Cmd, win fixedWin, sent int64) (d limiter.Decision, redisNow int64, ok bool, err error) {
	var v [2]int64
	if err := decodeInts(cmd, v[:]); err != nil {
		return limiter.Decision{Policy: r.Policy.Name}, 0, false, fmt.Errorf("running fixed_window script: %w", err)
	}
	if !b.client {
		b.observe(v[0], sent)
	}
	if v[1] < 0 {
		return limiter.Decision{}, v[0], false, nil
	}
	return fixedDecision(r.Policy, r.Cost, v[1], v[0], win), v[0], true, nil
}

// decideFixedOne decides one fixed-window request with fixed_window.lua,
// naming the window of now (µs; Redis's clock unless Config.ClientClock):
// one round trip, or more when that is not Redis's window. tries is how many
// calls the request has made already.
func (b *Backend) decideFixedOne(ctx context.Context, r *limiter.BackendRequest, now int64, tries int) (limiter.Decision, error) {
	s := scripts[limiter.FixedWindow]
	for ; tries < maxWindowTries; tries++ {
		keys, args, win := b.fixedArgs(r, now)
		sent := time.Now().UnixMicro()
		d, at, ok, err := b.fixedReply(r, b.run(ctx, s, keys, args), win, sent)
		if err != nil || ok {
			return d, err
		}
		now = at // Redis is in another window: ask for that one
	}
	return limiter.Decision{Policy: r.Policy.Name}, fmt.Errorf("running fixed_window script: %w", errWindowRace)
}

// batchCall returns the KEYS and ARGV of one fixed_window_batch call for
// reqs, and the window each names: the one holding now (µs, Redis's clock),
// or with Config.ClientClock, each request's own Now. The requests of one
// policy and window share one triple of ARGV, and a request adds one value
// (two when its cost is not 1): Redis parses fewer arguments per decision.
func (b *Backend) batchCall(reqs []*limiter.BackendRequest, wins []fixedWin, now int64) ([]string, []any) {
	type slot struct {
		p  *limiter.Policy
		lo int64
	}
	var slots []slot
	keys := make([]string, len(reqs))
	perReq := make([]any, 0, len(reqs)+2)
	head := make([]any, 2, 2+3*4+len(reqs)+2)
	head[0] = "" // Redis TIME
	if b.client {
		head[0] = "c"
	}
	for i, r := range reqs {
		lo := now
		if b.client {
			lo = r.Now.UnixMicro()
		}
		wins[i] = windowAt(r.Policy, lo)
		if !b.client {
			lo = wins[i].start
		}
		keys[i] = b.fixedKey(r.Policy, r.Key, wins[i])
		j := slices.IndexFunc(slots, func(s slot) bool { return s.lo == lo && (s.p == r.Policy || *s.p == *r.Policy) })
		if j < 0 {
			j = len(slots)
			slots = append(slots, slot{r.Policy, lo})
			head = append(head, b.prepare(r.Policy).static[0], lo, wins[i].end)
		}
		if r.Cost == 1 {
			perReq = append(perReq, j+1)
		} else {
			perReq = append(perReq, -(j + 1), r.Cost)
		}
	}
	head[1] = len(slots)
	return keys, append(head, perReq...)
}

// decideFixed decides fixed-window requests in one fixed_window_batch command
// (plus one EVAL after NOSCRIPT), writing out[i] and errs[i] for reqs[i]; the
// requests whose window Redis had left go again in one more call (up to
// maxWindowTries calls).
func (b *Backend) decideFixed(ctx context.Context, reqs []*limiter.BackendRequest, out []limiter.Decision, errs []error) {
	wins := make([]fixedWin, len(reqs))
	idx := make([]int, len(reqs)) // the position in out of each of reqs
	for i := range idx {
		idx[i] = i
	}
	now := int64(0)
	if !b.client {
		now = b.redisNow()
	}
	for try := 0; len(reqs) > 0; try++ {
		if try == maxWindowTries {
			for _, i := range idx {
				out[i], errs[i] = limiter.Decision{Policy: reqs[0].Policy.Name}, fmt.Errorf("running fixed_window_batch script: %w", errWindowRace)
			}
			return
		}
		keys, args := b.batchCall(reqs, wins, now)
		sent := time.Now().UnixMicro()
		reqs, idx, now = b.readBatch(b.run(ctx, batchScript, keys, args), sent, reqs, wins, idx, out, errs)
	}
}

// readBatch decodes a fixed_window_batch reply for reqs (reqs[k] deciding
// out[idx[k]]) and returns the requests to send again, in place, and Redis's
// time to name their windows from.
func (b *Backend) readBatch(cmd *goredis.Cmd, sent int64, reqs []*limiter.BackendRequest, wins []fixedWin, idx []int, out []limiter.Decision, errs []error) ([]*limiter.BackendRequest, []int, int64) {
	vals := make([]int64, 1+len(reqs))
	if err := decodeInts(cmd, vals); err != nil {
		for k, r := range reqs {
			out[idx[k]], errs[idx[k]] = limiter.Decision{Policy: r.Policy.Name}, fmt.Errorf("running fixed_window_batch script: %w", err)
		}
		return nil, nil, 0
	}
	now := vals[0]
	if !b.client {
		b.observe(now, sent)
	}
	again := 0
	for k, r := range reqs {
		n := vals[1+k]
		if n < 0 {
			reqs[again], idx[again] = r, idx[k]
			again++
			continue
		}
		at := now
		if b.client {
			at = r.Now.UnixMicro()
		}
		out[idx[k]] = fixedDecision(r.Policy, r.Cost, n, at, wins[k])
	}
	return reqs[:again], idx[:again], now
}
