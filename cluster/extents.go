package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/slide-metrics/slide/window"
)

// The extent read (opExtents) is what promapi's listings (/api/v1/labels, a label's values,
// /api/v1/series) read through the cluster: of each series a selector matches, only what
// tells whether it has samples in a range, its series string, the slot current at the
// read's now and its first live slot up to the read's instant, never the slots themselves
// (opSlots' counts, sums and bins). The request is opSlots' (m, at), with a window (the
// retention, which an older peer checks before it finds the op unknown; see VisitExtents);
// the answer (after the served partitions):
//
//	n (series cur back)*n
//
// series a string, cur a varint (as opSlots'), back a uvarint (cur − the first live slot's
// index, at most maxSlotBack). A series with no live slot up to the read's instant is not
// sent, as opSlots sends none.
//
// A peer of the version before it answers "unknown op" (400, errUnknownOp): the asker then
// reads that peer's partitions with opSlots and takes each series' cur and first slot from
// its slots, so a listing answers the same against old and new peers. It remembers the
// refusal for olderFor, asking such a peer opSlots straight away meanwhile: a rolling
// upgrade costs one refused round trip per old peer a minute, not one per listing, and a
// peer upgraded since is asked opExtents again within a minute.

// olderFor is how long a peer that refused an op is asked the older one instead.
const olderFor = time.Minute

// errUnknownOp is a peer's refusal of an op it does not know (a peer of an older version).
var errUnknownOp = errors.New("cluster: the peer does not know the op")

// errOlderVersion counts a refusal of an op that has an older one to ask instead
// (result="older_version"): a rolling upgrade half done, not a failed read.
var errOlderVersion = errors.New("cluster: the peer runs an older version")

// extentSeries is one series of an opExtents answer.
type extentSeries struct {
	series     string
	cur, first int64
}

// appendExtents serves an opExtents request: of each series of metric that key and the m
// parameters select, fed by parts, with a live slot up to the request's at (an instant at
// most its now), the slot current at its now and the first live slot, of the rings as they
// stand at its now (as appendSlots reads them).
func (c *Cluster) appendExtents(ctx context.Context, b []byte, q url.Values, now int64, metric, key string, parts map[int32]bool) ([]byte, error) {
	at, sel, err := peerInstant(q, now, key)
	if err != nil {
		return b, err
	}
	last := window.FloorDiv(at, c.cfg.Store.RingConfig(metric).Slot.Milliseconds())
	var body []byte
	n := 0
	c.cfg.Store.VisitFirstSlots(now, metric, sel, func(p int32) bool { return p >= 0 && parts[p] }, ctxStop(ctx), func(series string, cur, first int64, live bool) bool {
		if !live || first > last {
			return true
		}
		n++
		body = appendExtent(body, series, cur, first)
		return true
	})
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, body...), nil
}

// appendExtent writes one series of an opExtents answer (first at most cur).
func appendExtent(b []byte, series string, cur, first int64) []byte {
	b = appendString(b, series)
	b = binary.AppendVarint(b, cur)
	return binary.AppendUvarint(b, uint64(cur-first))
}

// extentList decodes an opExtents answer's body.
func (r *reader) extentList() []extentSeries {
	n := r.count("series")
	out := make([]extentSeries, 0, n)
	for range n {
		s := extentSeries{series: string(r.bytes("series")), cur: r.varint("cur")}
		back := r.uvarint("first slot")
		switch {
		case r.err != nil:
		case s.cur > maxSlotIndex || s.cur < -maxSlotIndex:
			r.fail("slot %d out of range", s.cur)
		case back > maxSlotBack:
			r.fail("slot %d before the current one", back)
		}
		if r.err != nil {
			return nil
		}
		s.first = s.cur - int64(back)
		out = append(out, s)
	}
	return out
}

// askOlder is ask, except that a peer which does not know r.op (errUnknownOp), or refused
// it less than olderFor ago, is asked r.older instead when r names one. Only the refusals
// of the last olderFor are kept (c.older), whatever the addresses peers came and went by.
func (c *Cluster) askOlder(ctx context.Context, addr string, r *request) (*answer, error) {
	if r.older == "" {
		return c.ask(ctx, addr, r)
	}
	older := *r
	older.op, older.older = r.older, ""
	if until, ok := c.older.Load(addr); ok && c.now() < until.(int64) {
		return c.ask(ctx, addr, &older)
	}
	a, err := c.ask(ctx, addr, r)
	if errors.Is(err, errUnknownOp) {
		now := c.now()
		// The refusals past olderFor are forgotten as one is remembered, so the map holds
		// the peers that refused within the last olderFor, not every address that ever did
		// (old members come and go under new addresses). At most one store per peer a
		// minute, each a pass over those few.
		c.older.Range(func(k, v any) bool {
			if now >= v.(int64) {
				c.older.CompareAndDelete(k, v)
			}
			return true
		})
		c.older.Store(addr, now+olderFor.Milliseconds())
		// Expected while a rolling upgrade is half done: said once per peer a minute, and
		// counted as result="older_version", not as a failed read.
		c.log.Info("cluster: peer runs an older version; reading its partitions with the op it knows", "peer", addr, "op", r.op, "instead", r.older, "for", olderFor)
		return c.ask(ctx, addr, &older)
	}
	return a, err
}

// extent is a series' cur and first live slot, merged over the instances that hold it.
type extent struct{ cur, first int64 }

// VisitExtents calls fn once for each series of metric that the label matchers ms select,
// held by any instance, that has a live slot up to the instant at (unix ms, at most wall,
// the clock's now), with its cur and the index of its first live slot: exactly what
// VisitSlots would hand as cur and slots[0].Index (a series it would hand without a slot is
// not visited). It reads this instance's series as VisitSlots does and asks the peers
// opExtents (opSlots of a peer that does not know it), so no slot is built or sent.
//
// A series several instances hold merges as VisitSlots merges its slots: cur is the
// largest, the first slot the earliest. When one copy's first slot lies before the
// retention of the merged cur (an instance whose clock put the ring a slot ahead), the
// merge would drop it, and which later slot is then the first only the slots tell: the
// series held by a peer are then read again with VisitSlots, so the answer stays exact.
// This instance's series that no peer holds are visited first, under the series' lock
// (fn must not call the store; a series read again is handed under it too); the others
// after, in no particular order. fn returns false
// to stop. missing lists the partitions no instance served; err is the selector's or ctx's.
func (c *Cluster) VisitExtents(ctx context.Context, wall, at int64, metric string, ms []window.Matcher, fn func(series string, cur, first int64) bool) (missing []int32, err error) {
	sel, err := window.CompileSelector("", ms)
	if err != nil {
		return nil, err
	}
	if at > wall {
		return nil, fmt.Errorf("cluster: extent read at %d, after now %d", at, wall)
	}
	local, gen := c.localSet()
	rc := c.cfg.Store.RingConfig(metric)
	n, last := int64(rc.Slots), window.FloorDiv(at, rc.Slot.Milliseconds())
	remote := map[string]*extent{}
	add := func(series string, cur, first int64) {
		if e, ok := remote[series]; ok {
			e.cur, e.first = max(e.cur, cur), min(e.first, first)
			return
		}
		remote[series] = &extent{cur: cur, first: first}
	}
	// The window (the retention, at most maxPeerWindow) is for a peer of the version before
	// opExtents, which asks a valid one of every op it does not exempt before it finds the
	// op unknown: without it, or with a retention past a year, its answer would be "bad now
	// or window", not "unknown op". The peers of today do not read it.
	r := request{op: opExtents, older: opSlots, metric: metric, ms: ms, now: wall, at: at, winMs: min(rc.Retention(), maxPeerWindow).Milliseconds()}
	missing = c.fanout(ctx, r, local, func(a *answer) {
		for _, s := range a.extents {
			add(s.series, s.cur, s.first)
		}
		for _, s := range a.slots { // a peer of the version before opExtents
			if len(s.slots) > 0 {
				add(s.series, s.cur, s.slots[0].Index)
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stopped := false
	c.cfg.Store.VisitFirstSlots(wall, metric, sel, func(p int32) bool { return p < 0 || local[p] }, ctxStop(ctx), func(series string, cur, first int64, live bool) bool {
		live = live && first <= last
		if e, ok := remote[series]; ok {
			e.cur = max(e.cur, cur) // a copy without a slot up to at moves cur too, as in VisitSlots
			if live {
				e.first = min(e.first, first)
			}
			return true
		}
		if live {
			stopped = !fn(series, cur, first)
		}
		return !stopped
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if stopped {
		return c.settle(gen, local, missing), nil
	}
	for _, e := range remote {
		if e.first < e.cur-n+1 {
			return c.reread(ctx, wall, at, metric, ms, remote, missing, gen, local, fn)
		}
	}
	for series, e := range remote {
		if !fn(series, e.cur, e.first) {
			break
		}
	}
	return c.settle(gen, local, missing), nil
}

// reread ends VisitExtents when the extents cannot tell a merged series' first slot: the
// series of remote are read again with VisitSlots and handed from their slots. missing
// gains the partitions the second read missed.
func (c *Cluster) reread(ctx context.Context, wall, at int64, metric string, ms []window.Matcher, remote map[string]*extent, missing []int32, gen int32, local map[int32]bool, fn func(series string, cur, first int64) bool) ([]int32, error) {
	again, err := c.VisitSlots(ctx, wall, at, metric, ms, func(series string, cur int64, slots []window.SlotView) bool {
		if _, ok := remote[series]; !ok || len(slots) == 0 {
			return true
		}
		delete(remote, series)
		return fn(series, cur, slots[0].Index)
	})
	if err != nil {
		return nil, err
	}
	missing = c.settle(gen, local, missing)
	for _, p := range again {
		if !slices.Contains(missing, p) {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	return missing, nil
}
