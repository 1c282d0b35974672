package window

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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

// SnapshotVersion is the format version AppendSnapshot writes and LoadSnapshot reads.
const SnapshotVersion = 1

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
			fn(SlotState{Idx: i, Count: s.count, Sum: s.sum, Min: s.min, Max: s.max, Bins: s.bins.View(&scratch)})
		}
	}
	return r.cur
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
			b.Add(r.ix, e.v, e.n)
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
			*s = slot{idx: st.Idx, count: st.Count, sum: st.Sum, min: st.Min, max: st.Max, bins: sketch.SlotOf(st.Bins)}
			r.live++
		case s.idx == st.Idx:
			s.count += st.Count
			s.sum += st.Sum
			s.min, s.max = min(s.min, st.Min), max(s.max, st.Max)
			s.bins.Open().AddBins(st.Bins)
		}
	}
	// agg holds the completed live slots, packed; the current one joins it at its next full read.
	r.agg.Reset()
	r.curInAgg, r.openPast = false, 0
	for i := range r.slots {
		if s := &r.slots[i]; s.count > 0 && s.idx < r.cur {
			s.bins.AddTo(&r.agg)
			s.bins.Pack()
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
// between batches.
//
// The encoding, version SnapshotVersion: "SLWS", the version byte, the series (metric,
// key, shape, current slot and slot count as fixed 8 and 4 bytes, then each live slot: how
// far below the ring's last slot it is, count, sum, min, max, and the length and bytes of
// its bins as sketch.Bins.AppendBinary), the table of ring shapes they name (slot ms,
// slots, skew ms, sketch kind as Kind.String), the table's position as 4 bytes, and a
// CRC-32C (Castagnoli) of everything before it. Other integers are varints, floats their
// IEEE bits, fixed-size fields little-endian, strings length-prefixed. Slots go straight
// from the rings into dst: reusing dst, a snapshot allocates next to nothing.
func (s *Store) AppendSnapshot(dst []byte, now int64, p int32) ([]byte, int) {
	start := len(dst)
	dst = append(dst, snapshotMagic[:]...)
	dst = append(dst, SnapshotVersion)
	// The series go straight into dst; the table of the shapes they use follows them, with
	// its position at the end, so the encoding needs no second buffer.
	shapes := map[string]uint64{}
	var order []RingConfig
	body := dst
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for se := range sh.all() {
			if se.partition != p {
				continue
			}
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
				body = binary.AppendUvarint(body, uint64(se.ring.cur+se.ring.ahead()-st.Idx))
				body = binary.AppendUvarint(body, st.Count)
				body = binary.LittleEndian.AppendUint64(body, math.Float64bits(st.Sum))
				body = binary.LittleEndian.AppendUint64(body, math.Float64bits(st.Min))
				body = binary.LittleEndian.AppendUint64(body, math.Float64bits(st.Max))
				lenAt := len(body)
				body = append(body, 0, 0, 0, 0) // placeholder for the bins' length
				body, _ = st.Bins.AppendBinary(body)
				binary.LittleEndian.PutUint32(body[lenAt:], uint32(len(body)-lenAt-4))
				slots++
			})
			if slots == 0 {
				body = body[:mark]
				continue
			}
			if !ok {
				shapes[se.metric] = idx
				order = append(order, se.ring.cfg)
			}
			binary.LittleEndian.PutUint64(body[curAt:], uint64(cur))
			binary.LittleEndian.PutUint32(body[curAt+8:], uint32(slots))
			n++
		}
		sh.mu.Unlock()
	}
	dst = body
	shapesAt := len(dst) - start
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, rc := range order {
		dst = binary.AppendUvarint(dst, uint64(rc.Slot.Milliseconds()))
		dst = binary.AppendUvarint(dst, uint64(rc.Slots))
		dst = binary.AppendUvarint(dst, uint64(rc.Skew.Milliseconds()))
		dst = appendString(dst, rc.Sketch.String())
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(shapesAt))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), n
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// snapSeries is one decoded series, before it joins the store.
type snapSeries struct {
	metric, key string
	cur         int64
	slots       []SlotState
}

// LoadSnapshot adds the series of a snapshot made by AppendSnapshot to the store, as fed by
// partition p, and returns how many it added. Rings merge into series already present.
// It is all or nothing: the whole snapshot is decoded and checked first, and on an error
// (wrapping ErrSnapshotVersion, ErrSnapshotCorrupt or ErrSnapshotShape) the store is
// unchanged. A series beyond MaxSeries is refused and counted as Refused, as its first
// event would be. It never panics on hostile input and allocates at most a small multiple
// of len(data).
func (s *Store) LoadSnapshot(now int64, p int32, data []byte) (int, error) {
	all, err := s.decodeSnapshot(data)
	if err != nil {
		return 0, err
	}
	added := 0
	for i := range all {
		ss := &all[i]
		h := s.hash(ss.metric, ss.key)
		sh := &s.shards[h&s.mask]
		sh.mu.Lock()
		se := sh.lookup(h, ss.metric, ss.key)
		created := se == nil
		if created {
			if se, err = s.create(sh, h, Event{Metric: ss.metric, Key: ss.key}); err != nil {
				sh.mu.Unlock()
				continue
			}
		}
		se.ring.restore(ss.cur, ss.slots)
		if se.ring.Empty(now) && created {
			s.unlinkNew(sh, h, se) // nothing of it is left in the window at now
		} else {
			se.partition = p
			added++
		}
		sh.mu.Unlock()
	}
	return added, nil
}

// decodeSnapshot checks and decodes data without touching the store.
func (s *Store) decodeSnapshot(data []byte) ([]snapSeries, error) {
	if len(data) < len(snapshotMagic)+1+4+4 || [4]byte(data[:4]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a window snapshot", ErrSnapshotCorrupt)
	}
	if v := data[4]; v != SnapshotVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrSnapshotVersion, v, SnapshotVersion)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrSnapshotCorrupt)
	}
	shapesAt := uint64(binary.LittleEndian.Uint32(body[len(body)-4:]))
	if shapesAt < 5 || shapesAt > uint64(len(body)-4) {
		return nil, fmt.Errorf("%w: shape table at %d of %d bytes", ErrSnapshotCorrupt, shapesAt, len(body))
	}
	d := snapDecoder{p: body[shapesAt : len(body)-4]}
	type shape struct {
		width, slots, ahead int64
		rc                  RingConfig
	}
	nShapes := d.count("shapes", 4)
	if nShapes > maxSnapshotShapes {
		d.fail("%d shapes", nShapes)
	}
	shapes := make([]shape, 0, nShapes)
	for range nShapes {
		width, slots, skew := d.uvarint("slot width"), d.uvarint("slots"), d.uvarint("skew")
		kindStr := d.str("sketch kind")
		if d.err != nil {
			break
		}
		kind, err := sketch.ParseKind(kindStr)
		if err != nil || width == 0 || width > math.MaxInt32 || slots == 0 || slots > 100_000 || skew > math.MaxInt32 {
			d.fail("ring shape %d ms × %d, skew %d ms, sketch %q", width, slots, skew, kindStr)
			break
		}
		rc := RingConfig{Slot: msDuration(width), Slots: int(slots), Skew: msDuration(skew), Sketch: kind}
		shapes = append(shapes, shape{width: int64(width), slots: int64(slots), ahead: (int64(skew) + int64(width) - 1) / int64(width), rc: rc})
	}
	if d.err == nil && len(d.p) > 0 {
		d.fail("%d bytes after the shape table", len(d.p))
	}
	d.p = body[5:shapesAt]
	out := make([]snapSeries, 0, len(d.p)/(5+12+29))
	for d.err == nil && len(d.p) > 0 {
		ss := snapSeries{metric: d.str("metric"), key: d.str("key")}
		si := d.uvarint("shape")
		ss.cur = int64(d.u64("current slot"))
		nSlots := d.u32("slots")
		if d.err == nil && nSlots > uint64(len(d.p))/29 {
			d.fail("%d slots in %d bytes", nSlots, len(d.p))
		}
		if d.err != nil {
			break
		}
		if ss.metric == "" || ss.key == "" || si >= uint64(len(shapes)) {
			d.fail("series %q/%q: empty name or shape %d of %d", ss.metric, ss.key, si, len(shapes))
			break
		}
		sp := shapes[si]
		if nSlots == 0 || nSlots > uint64(sp.slots+sp.ahead) || ss.cur < math.MinInt64/4 || ss.cur > math.MaxInt64/4 {
			d.fail("series %q/%q: %d slots, current %d", ss.metric, ss.key, nSlots, ss.cur)
			break
		}
		ss.slots = make([]SlotState, 0, nSlots)
		last := int64(math.MinInt64)
		for range nSlots {
			back := d.uvarint("slot index")
			st := SlotState{Count: d.uvarint("count"), Sum: d.float("sum"), Min: d.float("min"), Max: d.float("max")}
			binsLen := d.u32("bins length")
			raw := d.bytes("bins", binsLen)
			if d.err != nil {
				break
			}
			st.Idx = ss.cur + sp.ahead - int64(min(back, 1<<40))
			if back >= uint64(sp.slots+sp.ahead) || st.Idx <= last || st.Count == 0 ||
				!finite(st.Sum, st.Min, st.Max) || st.Min > st.Max {
				d.fail("series %q/%q: slot %d: bad index, count or values", ss.metric, ss.key, st.Idx)
				break
			}
			st.Bins = new(sketch.Bins)
			if err := st.Bins.UnmarshalBinary(raw); err != nil || st.Bins.Count() != st.Count {
				d.fail("series %q/%q: slot %d: bins: %v", ss.metric, ss.key, st.Idx, err)
				break
			}
			last = st.Idx
			ss.slots = append(ss.slots, st)
		}
		if d.err != nil {
			break
		}
		rc := s.RingConfig(ss.metric)
		if rc.Slot != sp.rc.Slot || rc.Slots != sp.rc.Slots || !rc.Sketch.Equal(sp.rc.Sketch) {
			return nil, fmt.Errorf("%w: %s: snapshot %v × %d %v, store %v × %d %v", ErrSnapshotShape, ss.metric,
				sp.rc.Slot, sp.rc.Slots, sp.rc.Sketch, rc.Slot, rc.Slots, rc.Sketch)
		}
		out = append(out, ss)
	}
	if d.err == nil && len(d.p) > 0 {
		d.fail("%d trailing bytes", len(d.p))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshotCorrupt, d.err)
	}
	return out, nil
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

// snapDecoder reads a snapshot body; the first error sticks and later reads return zeros.
type snapDecoder struct {
	p   []byte
	err error
}

func (d *snapDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *snapDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail("reading %s: bad varint", what)
		return 0
	}
	d.p = d.p[n:]
	return x
}

func (d *snapDecoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Varint(d.p)
	if n <= 0 {
		d.fail("reading %s: bad varint", what)
		return 0
	}
	d.p = d.p[n:]
	return x
}

// count reads an element count and checks the remaining input could hold that many
// elements of at least minSize bytes each: this bounds every allocation by len(data).
func (d *snapDecoder) count(what string, minSize uint64) uint64 {
	n := d.uvarint(what)
	if d.err == nil && n > uint64(len(d.p))/minSize {
		d.fail("%d %s in %d bytes", n, what, len(d.p))
		return 0
	}
	return n
}

func (d *snapDecoder) bytes(what string, n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.fail("reading %s: %d bytes, %d left", what, n, len(d.p))
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

func (d *snapDecoder) str(what string) string { return string(d.bytes(what, d.uvarint(what))) }

func (d *snapDecoder) u32(what string) uint64 {
	b := d.bytes(what, 4)
	if b == nil {
		return 0
	}
	return uint64(binary.LittleEndian.Uint32(b))
}

func (d *snapDecoder) u64(what string) uint64 {
	b := d.bytes(what, 8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (d *snapDecoder) float(what string) float64 {
	b := d.bytes(what, 8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}
