package window

import (
	"cmp"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// Snapshot errors. LoadSnapshot's errors wrap one of them, so a caller can count why a
// snapshot was not used.
var (
	ErrSnapshotVersion = errors.New("window: snapshot of an unknown format version")
	ErrSnapshotCorrupt = errors.New("window: corrupt snapshot")
	ErrSnapshotShape   = errors.New("window: snapshot rings differ from the store's config")
)

// SnapshotVersion is the newest format version: AppendSnapshot writes it for a store that
// keeps exemplars (StoreConfig.Exemplars), and version 2, the format before exemplars, for
// one that keeps none, so that a slide that reads only versions 1 and 2 (a rollback) can
// still restore what a store without exemplars wrote. LoadSnapshot reads all three: version
// 2 restored without exemplars, and version 1, the format before tiers (issue #29): a ring
// without tiers, restored into the store's ring with its tiers empty.
const SnapshotVersion = 3

// snapshotVersion is the version AppendSnapshot writes for s (SnapshotVersion).
func (s *Store) snapshotVersion() byte {
	if s.cfg.Exemplars {
		return SnapshotVersion
	}
	return 2
}

// snapshotMagic starts every snapshot, so a stray record is not mistaken for one.
var snapshotMagic = [4]byte{'S', 'L', 'W', 'S'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxSnapshotShapes bounds the shape table (one shape per metric with its own ring).
const maxSnapshotShapes = 1 << 16

// SlotState is one live slot of a ring as a snapshot carries it: its absolute index
// (floor(ts / width)), count, sum, exact min and max, and quantile bins.
type SlotState struct {
	Idx           int64
	Count         uint64
	Sum, Min, Max float64
	Bins          *sketch.Bins

	// packed holds the bins instead of Bins in a slot a snapshot's decoder staged: packed
	// as the store keeps a past slot, so a restore holds them once at their stored size,
	// not open (about 3× as large) until the whole snapshot is in.
	packed sketch.Slot
}

// hasBins reports whether st carries bins, open or packed.
func (st *SlotState) hasBins() bool { return st.Bins != nil || !st.packed.Empty() }

// slot returns st's bins as a sketch.Slot, taking them over.
func (st *SlotState) slot() sketch.Slot {
	if st.Bins != nil {
		return sketch.SlotOf(st.Bins)
	}
	return st.packed
}

// addTo adds st's bins to b.
func (st *SlotState) addTo(b *sketch.Bins) {
	if st.Bins != nil {
		b.AddBins(st.Bins)
		return
	}
	st.packed.AddTo(b)
}

// export advances r to now and calls fn for every live slot, oldest first; it returns the
// current slot index. The bins passed are r's own: fn must encode them, not keep them.
// This and restore are the whole of what a snapshot needs from a ring's internals.
func (r *Ring) export(now int64, fn func(SlotState)) (cur int64) {
	r.advance(now)
	if r.slots == nil {
		r.exportRaw(fn)
		return r.cur
	}
	if r.live == 0 {
		return r.cur
	}
	var scratch sketch.Bins // a packed slot's bins, decoded for fn
	for i := r.cur - r.n + 1; i <= r.cur+r.ahead(); i++ {
		if s := &r.slots[r.pos(i)]; s.count > 0 && s.idx == i {
			st := SlotState{Idx: i, Count: s.count, Sum: s.sum, Min: s.min, Max: s.max}
			if !r.noSketch {
				st.Bins = s.bins.View(&scratch)
			}
			fn(st)
		}
	}
	return r.cur
}

// exportTiers calls fn for every live slot of r's tiers, coarsest tier first and oldest
// slot first in each, with the tier's current slot; the bins are r's own (nil without a
// sketch), as export's.
func (r *Ring) exportTiers(fn func(t int, cur int64, st SlotState)) {
	if r.tiers == nil {
		return
	}
	var scratch sketch.Bins
	for i := len(r.tiers.t) - 1; i >= 0; i-- {
		t := &r.tiers.t[i]
		for k := t.cur - t.n + 1; t.stats != nil && k <= t.cur; k++ {
			q := t.pos(k)
			if s := &t.stats[q]; s.count > 0 {
				st := SlotState{Idx: k, Count: s.count, Sum: s.sum, Min: s.min, Max: s.max}
				if t.bins != nil {
					st.Bins = t.bins[q].View(&scratch)
				}
				fn(i, t.cur, st)
			}
		}
	}
}

// restoreTiers merges slots of r's tier t (absolute indexes of its width) into it, as the
// slots aging out of r would fold. restore keeps the Bins it is given.
func (r *Ring) restoreTiers(t int, slots []SlotState) {
	if r.tiers == nil {
		r.tiers = newTierSet(r.cfg, r.ix)
	}
	for _, st := range slots {
		p := part{count: st.Count, sum: st.Sum, min: st.Min, max: st.Max}
		if st.hasBins() && !r.noSketch {
			p.bins = st.slot()
			p.bins.Pack()
		}
		r.tiers.add(t, st.Idx*r.tiers.t[t].width, &p)
	}
}

// exportRaw is export of a sparse ring: the slots its raw events make, exactly as a dense
// ring (or view) holds them (each slot's sum in arrival order, its bins from its events),
// built slot by slot in one pooled scratch Bins instead of materializing a dense view, which
// cost about 24 allocations a series (BenchmarkAppendSnapshot: 595,091 for 25,000 sparse
// series before).
func (r *Ring) exportRaw(fn func(SlotState)) {
	if len(r.raw) == 0 {
		return
	}
	var buf [RawEvents]rawEvent
	evs := append(buf[:0], r.raw...)
	slices.SortStableFunc(evs, func(a, b rawEvent) int { return cmp.Compare(a.idx, b.idx) })
	b := scratchBins.Get().(*sketch.Bins)
	defer scratchBins.Put(b)
	for i := 0; i < len(evs); {
		st := SlotState{Idx: evs[i].idx, Min: evs[i].v, Max: evs[i].v, Bins: b}
		b.Clear()
		if r.noSketch {
			st.Bins = nil
		}
		for ; i < len(evs) && evs[i].idx == st.Idx; i++ {
			e := evs[i]
			st.Count += e.n
			st.Sum += e.v * float64(e.n)
			if e.v < st.Min { // as insert compares, so -0 and +0 keep the first seen
				st.Min = e.v
			}
			if e.v > st.Max {
				st.Max = e.v
			}
			if !r.noSketch {
				b.Add(r.ix, e.v, e.n)
			}
		}
		if st.Idx > r.cur-r.n && st.Idx <= r.cur+r.ahead() {
			fn(st)
		}
	}
	b.Clear()
}

// ahead is how many slots past the current one the skew can fill.
func (r *Ring) ahead() int64 { return r.size - r.n } // size, not len(slots): a sparse ring has none

// restore merges slots, a ring's state when its current slot was cur, into r: slots r
// already holds gain the counts (a series fed by two sources), slots outside r's window at
// max(cur, r's current slot) are dropped. The aggregate is rebuilt, so reads after a restore
// equal reads of the ring the snapshot was taken from. restore keeps the Bins it is given.
func (r *Ring) restore(cur int64, slots []SlotState) {
	r.advance(cur * r.width)
	if r.slots == nil && len(r.raw) == 0 && r.restoreRaw(slots) {
		return // it stays sparse, as the ring the snapshot was taken from most likely was
	}
	if r.slots == nil {
		r.upgrade() // restored slots hold bins, not raw events: the ring comes back dense
	}
	for _, st := range slots {
		if st.Count == 0 || st.Idx <= r.cur-r.n || st.Idx > r.cur+r.ahead() {
			continue
		}
		s := &r.slots[r.pos(st.Idx)]
		switch {
		case s.count == 0:
			*s = slot{idx: st.Idx, count: st.Count, sum: st.Sum, min: st.Min, max: st.Max}
			if st.hasBins() && !r.noSketch {
				s.bins = st.slot()
			}
			r.live++
		case s.idx == st.Idx:
			s.count += st.Count
			s.sum += st.Sum
			s.min, s.max = min(s.min, st.Min), max(s.max, st.Max)
			if st.hasBins() && !r.noSketch {
				st.addTo(s.bins.Open())
			}
		}
	}
	// agg holds the completed live slots, packed; the current one joins it at its next full read.
	r.agg.Reset()
	r.curInAgg, r.openPast = false, 0
	for i := range r.slots {
		switch s := &r.slots[i]; {
		case s.count > 0 && s.idx < r.cur:
			s.bins.AddTo(&r.agg)
			s.bins.Pack()
		case s.count > 0 && s.bins.IsPacked():
			s.bins.Open() // the current slot and those ahead stay open, to take events
		}
	}
}

// restoreRaw makes an empty sparse ring hold slots as raw events when their content fits
// the sparse form: at most RawEvents events, each slot rebuilt from its count, sum, min and
// max alone (one event; one value repeated, as one event of that count or as count events;
// or two values), checked to give back the slot's sum bit for bit as a dense ring adds it.
// A read of the ring then answers exactly what the snapshotted ring answered. It reports
// false, changing nothing, when some slot does not fit: the caller restores dense.
func (r *Ring) restoreRaw(slots []SlotState) bool {
	var buf [RawEvents]rawEvent
	raw := buf[:0]
	for _, st := range slots {
		if st.Count == 0 || st.Idx <= r.cur-r.n || st.Idx > r.cur+r.ahead() {
			continue
		}
		same := math.Float64bits(st.Min) == math.Float64bits(st.Max)
		switch {
		case same && bitsEqual(0+st.Min*float64(st.Count), st.Sum):
			if len(raw) == RawEvents {
				return false
			}
			raw = append(raw, rawEvent{idx: st.Idx, v: st.Min, n: st.Count})
		case same && st.Count <= uint64(RawEvents-len(raw)) && bitsEqual(repeatSum(st.Min, st.Count), st.Sum):
			for range st.Count {
				raw = append(raw, rawEvent{idx: st.Idx, v: st.Min, n: 1})
			}
		case st.Count == 2 && len(raw) <= RawEvents-2 && bitsEqual(0+st.Min+st.Max, st.Sum):
			raw = append(raw, rawEvent{idx: st.Idx, v: st.Min, n: 1}, rawEvent{idx: st.Idx, v: st.Max, n: 1})
		default:
			return false
		}
	}
	if len(raw) > 0 {
		r.raw = append([]rawEvent(nil), raw...)
	}
	return true
}

// repeatSum is the sum a dense slot holds after n events of v, one at a time.
func repeatSum(v float64, n uint64) float64 {
	s := 0.0
	for range n {
		s += v
	}
	return s
}

func bitsEqual(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// AppendSnapshot appends to dst the encoding of every series last fed by partition p, as
// of now (unix ms), and returns it with the number of series written. Series whose ring is
// empty at now are left out. It locks one shard at a time, so a snapshot is consistent for
// p only while nothing else feeds p's series: ingest calls it from the partition's worker,
// between batches. WriteSnapshot writes the same bytes to an io.Writer, in pieces.
//
// The encoding, version SnapshotVersion: "SLWS", the version byte, the series (metric,
// key, shape, current slot and slot count as fixed 8 and 4 bytes, then each live slot: how
// far below the ring's last slot it is, count, sum, min, max, and the length and bytes of
// its bins as sketch.Bins.AppendBinary, 0 bytes for a ring without a sketch; then the number
// of tiers holding slots, and for each its number, current slot, slot count and slots, as
// the ring's; then its exemplars, see snapshot_exemplar.go), the table of ring shapes they name (slot ms, slots, skew ms, sketch kind as
// Kind.String, flags (1: no sketch), the tiers' slot ms and slots), the table's position as
// 4 bytes, and a
// CRC-32C (Castagnoli) of everything before it. Other integers are varints, floats their
// IEEE bits, fixed-size fields little-endian, strings length-prefixed. Slots go straight
// from the rings into dst: reusing dst, a snapshot allocates next to nothing.
func (s *Store) AppendSnapshot(dst []byte, now int64, p int32) ([]byte, int) {
	e := snapEncoder{buf: dst, start: len(dst)}
	n := s.encodeSnapshot(&e, now, p)
	return e.buf, n
}

// SnapshotFlushBytes is about the most encoded bytes WriteSnapshot holds before it writes
// them: it writes after each shard's series and, within a shard, once this many are pending
// (at a series' end, so one series more).
const SnapshotFlushBytes = 256 << 10

// WriteSnapshot writes to w the encoding AppendSnapshot appends, byte for byte, and returns
// the number of series and of bytes written. It never holds the whole encoding: it writes
// what it encoded after each shard (outside the shard's lock), and within a shard once
// SnapshotFlushBytes are pending, so what it holds is about SnapshotFlushBytes and one
// series, whatever the partition's size (ingest writes into its compressor, and a snapshot
// of a partition then costs its compressed size, not its encoded one). The consistency rule
// is AppendSnapshot's. An error of w stops it and is returned.
func (s *Store) WriteSnapshot(w io.Writer, now int64, p int32) (series int, size int64, err error) {
	e := snapEncoder{w: w, buf: make([]byte, 0, 64<<10)}
	series = s.encodeSnapshot(&e, now, p)
	return series, e.written, e.err
}

// snapEncoder holds a snapshot's pending bytes: with w, it writes them out as they pass
// SnapshotFlushBytes (flush) and keeps the running CRC; without, they all stay in buf.
type snapEncoder struct {
	w       io.Writer
	buf     []byte
	start   int    // where the snapshot starts in buf (AppendSnapshot's len(dst))
	crc     uint32 // of what was written
	written int64
	err     error
}

// flush writes the pending bytes when there is a writer and force or they pass
// SnapshotFlushBytes; it is called between series only (a series patches its own bytes).
func (e *snapEncoder) flush(force bool) {
	if e.w == nil || e.err != nil || (!force && len(e.buf) < SnapshotFlushBytes) || len(e.buf) == 0 {
		return
	}
	e.crc = crc32.Update(e.crc, castagnoli, e.buf)
	_, e.err = e.w.Write(e.buf)
	e.written += int64(len(e.buf))
	e.buf = e.buf[:0]
}

// encodeSnapshot encodes partition p's series as of now into e (see AppendSnapshot) and
// returns how many it encoded.
func (s *Store) encodeSnapshot(e *snapEncoder, now int64, p int32) int {
	e.buf = append(e.buf, snapshotMagic[:]...)
	e.buf = append(e.buf, s.snapshotVersion())
	// The series go straight into the buffer; the table of the shapes they use follows them,
	// with its position at the end, so the encoding needs no second buffer.
	shapes := map[string]uint64{}
	var order []RingConfig
	n := 0
	for i := range s.shards {
		if e.err != nil {
			break
		}
		sh := &s.shards[i]
		sh.mu.Lock()
		for se := range sh.all() {
			if se.partition != p {
				continue
			}
			if e.err != nil {
				break
			}
			body := e.buf
			mark := len(body)
			idx, ok := shapes[se.metric]
			if !ok {
				idx = uint64(len(order))
			}
			body = appendString(body, se.metric)
			body = appendString(body, se.key)
			body = binary.AppendUvarint(body, idx)
			curAt := len(body)
			body = append(body, make([]byte, 8+4)...) // current slot and slot count, set below
			slots := 0
			cur := se.ring.export(now, func(st SlotState) {
				body = appendSlot(body, uint64(se.ring.cur+se.ring.ahead()-st.Idx), st)
				slots++
			})
			// The tiers (version 2): how many hold slots, then for each its number, current
			// slot and slot count as the ring's, and its slots as the ring's are written.
			tiersAt := len(body)
			body = append(body, 0)
			tiers, tierSlots, last, tierCurAt := 0, 0, -1, 0
			se.ring.exportTiers(func(t int, tcur int64, st SlotState) {
				if t != last {
					if last >= 0 {
						binary.LittleEndian.PutUint32(body[tierCurAt+8:], uint32(tierSlots))
					}
					body = binary.AppendUvarint(body, uint64(t))
					tierCurAt = len(body)
					body = binary.LittleEndian.AppendUint64(body, uint64(tcur))
					body = append(body, 0, 0, 0, 0)
					last, tierSlots = t, 0
					tiers++
				}
				body = appendSlot(body, uint64(tcur-st.Idx), st)
				tierSlots++
			})
			if last >= 0 {
				binary.LittleEndian.PutUint32(body[tierCurAt+8:], uint32(tierSlots))
				body[tiersAt] = byte(tiers) // at most MaxTiers: one varint byte
			}
			if s.cfg.Exemplars {
				body = sh.appendSnapExemplars(body, se) // version 3 (snapshot_exemplar.go)
			}
			if slots == 0 && tiers == 0 {
				e.buf = body[:mark]
				continue
			}
			if !ok {
				shapes[se.metric] = idx
				order = append(order, *se.ring.cfg)
			}
			binary.LittleEndian.PutUint64(body[curAt:], uint64(cur))
			binary.LittleEndian.PutUint32(body[curAt+8:], uint32(slots))
			e.buf = body
			n++
			e.flush(false) // under the lock, but only past SnapshotFlushBytes: a huge shard's share
		}
		sh.mu.Unlock()
		e.flush(true) // the shard's series, outside its lock
	}
	dst := e.buf
	shapesAt := e.written + int64(len(dst)-e.start)
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, rc := range order {
		dst = binary.AppendUvarint(dst, uint64(rc.Slot.Milliseconds()))
		dst = binary.AppendUvarint(dst, uint64(rc.Slots))
		dst = binary.AppendUvarint(dst, uint64(rc.Skew.Milliseconds()))
		dst = appendString(dst, rc.Sketch.String())
		var flags uint64
		if rc.NoSketch {
			flags |= shapeNoSketch
		}
		dst = binary.AppendUvarint(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(len(rc.Tiers)))
		for _, t := range rc.Tiers {
			dst = binary.AppendUvarint(dst, uint64(t.Slot.Milliseconds()))
			dst = binary.AppendUvarint(dst, uint64(t.Slots))
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(shapesAt))
	e.buf = binary.LittleEndian.AppendUint32(dst, crc32.Update(e.crc, castagnoli, dst[e.start:]))
	e.flush(true)
	return n
}

// shapeNoSketch is the shape table's flag of a ring without a sketch (version 2).
const shapeNoSketch = 1

// appendSlot appends one slot: how far below the ring's (or tier's) last slot it is, count,
// sum, min, max, and the length and bytes of its bins, a length of 0 for none (NoSketch).
func appendSlot(body []byte, back uint64, st SlotState) []byte {
	body = binary.AppendUvarint(body, back)
	body = binary.AppendUvarint(body, st.Count)
	body = binary.LittleEndian.AppendUint64(body, math.Float64bits(st.Sum))
	body = binary.LittleEndian.AppendUint64(body, math.Float64bits(st.Min))
	body = binary.LittleEndian.AppendUint64(body, math.Float64bits(st.Max))
	lenAt := len(body)
	body = append(body, 0, 0, 0, 0) // placeholder for the bins' length
	if st.Bins != nil {
		body, _ = st.Bins.AppendBinary(body)
	}
	binary.LittleEndian.PutUint32(body[lenAt:], uint32(len(body)-lenAt-4))
	return body
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// LoadSnapshot adds the series of a snapshot made by AppendSnapshot to the store, as fed by
// partition p, and returns how many it added: LoadSnapshotFrom over data in memory, with
// the default limits. It allocates at most a small multiple of len(data).
func (s *Store) LoadSnapshot(now int64, p int32, data []byte) (int, error) {
	l := &snapLoad{s: s, now: now, d: snapDecoder{p: data, buf: data, size: int64(len(data))}}
	return s.load(l, p)
}

// LoadSnapshotFrom adds the series of the snapshot of size bytes read from r (as made by
// AppendSnapshot) to the store, as fed by partition p, and returns how many it added.
// Rings merge into series already present: a series fed by another source (another
// partition, the API) sums both parts, as their events would.
//
// Every series is admitted as an event's would be (issue #25): its key and metric pass
// ValidName and lim's length (ErrSnapshotName, ErrSnapshotNameLength), no slot and no
// ring's current slot is ahead of now by more than the store's skew (ErrSnapshotFuture), no
// series is listed twice (ErrSnapshotDuplicate), and its ring has the store's shape and at
// most the slots the store's ring holds (ErrSnapshotShape). A series beyond MaxSeries is
// refused and counted as Refused, as its first event would be; the series beyond MaxSeries
// in the snapshot's order are checked and not kept. Anything malformed is
// ErrSnapshotCorrupt, another format ErrSnapshotVersion.
//
// It is all or nothing: the whole snapshot is read and checked first, and on an error the
// store is unchanged. It streams: what it holds at once besides the series it stages (at
// most MaxSeries, each within its ring) is a 64 KiB read buffer, one slot's bins (at most
// 32 MiB) or the last 4 MiB of the input, where the shape table is; never the whole
// snapshot. It never panics on hostile input.
func (s *Store) LoadSnapshotFrom(now int64, p int32, r io.Reader, size int64, lim SnapshotLimits) (int, error) {
	return s.load(s.streamLoad(now, r, size, lim, snapReadBytes, snapTailBytes), p)
}

// streamLoad is a load of size bytes from r, read chunk bytes at a time and the last tail
// bytes at once.
func (s *Store) streamLoad(now int64, r io.Reader, size int64, lim SnapshotLimits, chunk int, tail int64) *snapLoad {
	l := &snapLoad{s: s, now: now, lim: lim, d: snapDecoder{r: r, left: max(size, 0), size: max(size, 0), chunk: chunk, tailLen: tail}}
	if size <= 0 {
		l.d.r = nil
	}
	return l
}

// load decodes l and, when it holds, adds its series to the store.
func (s *Store) load(l *snapLoad, p int32) (int, error) {
	if err := l.decode(); err != nil {
		return 0, err
	}
	return s.apply(l, p), nil
}

// apply adds the series l decoded and staged to the store, as fed by partition p, and
// returns how many it added.
func (s *Store) apply(l *snapLoad, p int32) int {
	added := 0
	for i := range l.staged {
		ss := &l.staged[i]
		h := s.hash(ss.metric, ss.key)
		sh := &s.shards[h&s.mask]
		sh.mu.Lock()
		se := sh.lookup(h, ss.metric, ss.key)
		created := se == nil
		if created {
			var err error
			if se, err = s.create(sh, h, Event{Metric: ss.metric, Key: ss.key}); err != nil {
				sh.mu.Unlock()
				continue
			}
		}
		if len(ss.slots) > 0 { // a series of tiers alone moves no ring
			se.ring.restore(ss.cur, ss.slots)
		}
		for _, ts := range ss.tiers {
			if len(ts.slots) > 0 {
				se.ring.restoreTiers(ts.t, ts.slots)
			}
		}
		if se.ring.Empty(l.now) && created {
			s.unlinkNew(sh, h, se) // nothing of it is left in the window at now
		} else {
			for _, e := range ss.ex {
				sh.keepExemplar(se, e.idx, e.Exemplar)
			}
			se.partition = p
			added++
			if se.watched {
				sh.touch(se)
			}
		}
		sh.mu.Unlock()
		*ss = snapSeries{} // the ring holds its bins now; its staged slots can go
	}
	s.refused.Add(uint64(l.dropped))
	return added
}

func msDuration(ms uint64) time.Duration { return time.Duration(ms) * time.Millisecond }

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}
