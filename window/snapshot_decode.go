package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/slide-metrics/slide/sketch"
)

// This file is the reading side of snapshots: a decoder that reads a snapshot from memory or
// streams it from a reader in bounded pieces, and holds every series to the rules an event's
// series is held to at the door (issue #25).

// Errors of a snapshot refused by the admission rules. LoadSnapshot's errors wrap one of
// them (or ErrSnapshotCorrupt, ErrSnapshotVersion, ErrSnapshotShape), so a caller can
// count why a snapshot was not used; the store is then unchanged.
var (
	// ErrSnapshotName: a series' metric fails ValidName, the rule of every door, or its key
	// is no series string AppendSeries writes of a valid key and labels (CheckSeries).
	ErrSnapshotName = errors.New("window: snapshot series with a key or metric no door admits")
	// ErrSnapshotNameLength: a series' key or metric is longer than SnapshotLimits.MaxNameLen.
	ErrSnapshotNameLength = errors.New("window: snapshot series with a key or metric over the length limit")
	// ErrSnapshotFuture: a ring's current slot or a slot ahead of now by more than the
	// store's skew, as an event that far ahead is refused.
	ErrSnapshotFuture = errors.New("window: snapshot slot ahead of now + skew")
	// ErrSnapshotDuplicate: a series listed twice; AppendSnapshot writes each series once.
	ErrSnapshotDuplicate = errors.New("window: snapshot lists a series twice")
)

// SnapshotLimits are the rules LoadSnapshotFrom holds a snapshot's series to besides those
// of the store. The zero value is the defaults.
type SnapshotLimits struct {
	// MaxNameLen is the longest key or metric accepted, in bytes; default DefaultMaxNameLen.
	// Give the decoder's (event.Config.MaxKeyLen), so a restore admits what the log
	// would.
	MaxNameLen int
}

// Bounds of the streaming decoder: what it holds at once is its read buffer, one slot's bins
// at most, or the tail of the input, never the whole decoded snapshot.
const (
	snapReadBytes = 64 << 10 // read from the stream at a time
	// snapTailBytes is how close to the end the decoder reads the rest at once: the shape
	// table and the trailer, which it needs before the series it stages can be resolved.
	// A table has at most maxSnapshotShapes entries of a few tens of bytes (1.3 MB at 65,536
	// metrics); one larger is refused as corrupt.
	snapTailBytes = 4 << 20
	// maxSnapshotBins bounds one slot's encoded bins: a DDSketch slot at 1% from 1e-9 to 1e9
	// holds about 4,000 bins, a few KB; a side of sketch.MaxSpan one-byte counts is 8 MiB.
	maxSnapshotBins = 32 << 20
	minSlotBytes    = 28 // an encoded slot's least size: 2 varints, 3 floats, a length (no bins: NoSketch)
)

// snapDecoder reads a snapshot. p is the buffered input not yet read; when r is nil it is
// all the input left, else r holds left more bytes, read into buf as needed. The first
// error sticks and later reads return zeros.
type snapDecoder struct {
	p   []byte
	err error

	r       io.Reader
	left    int64  // bytes of r not yet read
	buf     []byte // p's backing buffer while streaming
	dropped int64  // input bytes read and dropped from buf
	crc     uint32 // CRC-32C of the dropped bytes
	size    int64  // the input's length
	chunk   int    // bytes read from r at a time: snapReadBytes (tests make it small)
	tailLen int64  // read the rest at once within this many bytes of the end: snapTailBytes
}

func (d *snapDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

// pos is the input offset of p's first byte.
func (d *snapDecoder) pos() int64 { return d.size - d.left - int64(len(d.p)) }

// need makes p hold at least n bytes, or all the input left; a stream read that fails is the
// decoder's error.
func (d *snapDecoder) need(n int) {
	if len(d.p) >= n || d.r == nil || d.err != nil {
		return
	}
	consumed := len(d.buf) - len(d.p)
	d.crc = crc32.Update(d.crc, castagnoli, d.buf[:consumed])
	d.dropped += int64(consumed)
	kept := copy(d.buf, d.p)
	m := int64(max(n-kept, d.chunk))
	if d.left-m <= d.tailLen {
		m = d.left // the tail: all of it, so its end can be read
	}
	if need := kept + int(m); cap(d.buf) < need {
		nb := make([]byte, need, max(need, 2*d.chunk))
		copy(nb, d.buf[:kept])
		d.buf = nb
	}
	d.buf = d.buf[:kept+int(m)]
	if _, err := io.ReadFull(d.r, d.buf[kept:]); err != nil {
		d.buf = d.buf[:kept]
		d.fail("reading the snapshot at %d of %d bytes: %w", d.dropped+int64(kept), d.size, err)
	}
	d.p = d.buf
	if d.left -= m; d.left == 0 && d.err == nil {
		var one [1]byte
		if n, _ := d.r.Read(one[:]); n > 0 {
			d.fail("the snapshot is longer than its %d bytes", d.size)
		}
		d.r = nil
	}
}

func (d *snapDecoder) uvarint(what string) uint64 {
	d.need(binary.MaxVarintLen64)
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

// count reads an element count and checks the remaining input could hold that many
// elements of at least minSize bytes each: this bounds every allocation by the input.
func (d *snapDecoder) count(what string, minSize uint64) uint64 {
	n := d.uvarint(what)
	if d.err == nil && n > uint64(d.size-d.pos())/minSize {
		d.fail("%d %s in %d bytes", n, what, d.size-d.pos())
		return 0
	}
	return n
}

func (d *snapDecoder) bytes(what string, n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(d.size-d.pos()) {
		d.fail("reading %s: %d bytes, %d left", what, n, d.size-d.pos())
		return nil
	}
	d.need(int(n))
	if d.err != nil {
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

func (d *snapDecoder) float(what string) float64 { return math.Float64frombits(d.u64(what)) }

// snapShape is one entry of a snapshot's shape table.
type snapShape struct {
	slots, ahead int64
	rc           RingConfig
}

// snapSeries is one decoded series, before it joins the store. Until resolve, each slot's
// Idx is its distance below the ring's last slot, as encoded.
type snapSeries struct {
	metric, key string
	shape       uint64
	cur         int64
	slots       []SlotState
	tiers       []snapTier
	ex          []exemplarSlot // version 3, when the store keeps exemplars (snapshot_exemplar.go)
}

// snapTier is the slots of one tier of a decoded series; until resolve, each slot's Idx is
// its distance below the tier's current slot.
type snapTier struct {
	t     int
	cur   int64
	slots []SlotState
}

// snapLoad is one load of a snapshot: the decoder, the series staged, and what resolve needs.
type snapLoad struct {
	s       *Store
	now     int64
	lim     SnapshotLimits
	d       snapDecoder
	version byte
	end     int64 // input offset where the series end (the shape table's), once the tail is in
	shapes  []snapShape
	staged  []snapSeries
	seen    map[[2]string]struct{}
	dropped int // series beyond MaxSeries: checked, not kept, refused as the cap refuses
	scratch sketch.Bins
}

// decode reads the whole snapshot and stages its series, or returns why it cannot be used.
func (l *snapLoad) decode() error {
	d := &l.d
	if l.lim.MaxNameLen <= 0 {
		l.lim.MaxNameLen = DefaultMaxNameLen
	}
	l.seen = map[[2]string]struct{}{}
	l.end = -1
	head := d.bytes("header", 5)
	if len(head) == 5 {
		l.version = head[4]
	}
	switch {
	case d.err != nil:
		return fmt.Errorf("%w: %w", ErrSnapshotCorrupt, d.err)
	case [4]byte(head[:4]) != snapshotMagic:
		return fmt.Errorf("%w: not a window snapshot", ErrSnapshotCorrupt)
	case head[4] < 1 || head[4] > SnapshotVersion:
		return fmt.Errorf("%w: version %d, this build reads 1 to %d", ErrSnapshotVersion, head[4], SnapshotVersion)
	case d.size < int64(len(snapshotMagic))+1+4+4:
		return fmt.Errorf("%w: %d bytes", ErrSnapshotCorrupt, d.size)
	}
	// In memory (or once a short stream is read whole), the checksum and the shape table
	// are read before any series; a long stream's series are staged as they come, and its
	// tail is read when the decoder gets near it.
	for d.err == nil && (l.end < 0 || d.pos() < l.end) {
		if l.end < 0 && d.r == nil {
			l.tail()
			continue
		}
		if err := l.series(); err != nil {
			return err
		}
	}
	if d.err == nil && d.pos() != l.end {
		d.fail("series end at %d, the shape table starts at %d", d.pos(), l.end)
	}
	if d.err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotCorrupt, d.err) // the reader's error too (a decompression budget)
	}
	return l.resolve()
}

// tail checks the checksum and reads the shape table, once buf holds the rest of the input
// (from offset dropped to the end).
func (l *snapLoad) tail() {
	d := &l.d
	rest := d.buf
	if len(rest) < 8 || d.dropped+int64(len(rest)) != d.size {
		d.fail("%d bytes at the end", len(rest))
		return
	}
	body := rest[:len(rest)-4]
	if crc32.Update(d.crc, castagnoli, body) != binary.LittleEndian.Uint32(rest[len(body):]) {
		d.fail("checksum mismatch")
		return
	}
	at := int64(binary.LittleEndian.Uint32(body[len(body)-4:]))
	if at < d.pos() || at > d.size-8 {
		d.fail("shape table at %d of %d bytes", at, d.size)
		return
	}
	l.end = at
	td := snapDecoder{p: rest[at-d.dropped : len(body)-4]}
	td.size = int64(len(td.p))
	nShapes := td.count("shapes", 4)
	if nShapes > maxSnapshotShapes {
		td.fail("%d shapes", nShapes)
	}
	l.shapes = make([]snapShape, 0, nShapes)
	for range nShapes {
		width, slots, skew := td.uvarint("slot width"), td.uvarint("slots"), td.uvarint("skew")
		kindStr := td.str("sketch kind")
		if td.err != nil {
			break
		}
		kind, err := sketch.ParseKind(kindStr)
		if err != nil || width == 0 || width > math.MaxInt32 || slots == 0 || slots > 100_000 || skew > math.MaxInt32 {
			td.fail("ring shape %d ms × %d, skew %d ms, sketch %q", width, slots, skew, kindStr)
			break
		}
		rc := RingConfig{Slot: msDuration(width), Slots: int(slots), Skew: msDuration(skew), Sketch: kind}
		if l.version >= 2 {
			flags, nt := td.uvarint("flags"), td.uvarint("tiers")
			if td.err == nil && (flags > shapeNoSketch || nt > MaxTiers) {
				td.fail("ring shape flags %d, %d tiers", flags, nt)
			}
			rc.NoSketch = flags&shapeNoSketch != 0
			for range nt {
				tw, tn := td.uvarint("tier slot width"), td.uvarint("tier slots")
				if td.err != nil || tw == 0 || tw > math.MaxInt32*1000 || tn == 0 || tn > 100_000 {
					td.fail("tier shape %d ms × %d", tw, tn)
					break
				}
				rc.Tiers = append(rc.Tiers, Tier{Slot: msDuration(tw), Slots: int(tn)})
			}
			if td.err != nil {
				break
			}
		}
		l.shapes = append(l.shapes, snapShape{slots: int64(slots), ahead: (int64(skew) + int64(width) - 1) / int64(width), rc: rc})
	}
	if td.err == nil && len(td.p) > 0 {
		td.fail("%d bytes after the shape table", len(td.p))
	}
	if td.err != nil {
		d.err = td.err
	}
}

// series reads one series: its names and slots are checked as they come, the checks that
// need the shape table wait for resolve. The returned error is an admission refusal; the
// decoder's own error is a corrupt snapshot.
func (l *snapLoad) series() error {
	d := &l.d
	metric, err := l.name("metric", l.lim.MaxNameLen)
	if err != nil {
		return err
	}
	// The key is a series string: the key, then its labels 0xFF-separated (a byte ValidName
	// refuses): room for MaxLabels labels of MaxLabelValueLen-byte values, names as long as keys.
	key, err := l.name("key", l.lim.MaxNameLen+MaxLabels*(2+l.lim.MaxNameLen+MaxLabelValueLen))
	if err != nil {
		return err
	}
	shape := d.uvarint("shape")
	cur := int64(d.u64("current slot"))
	n := d.u32("slots")
	if d.err != nil {
		return nil
	}
	if n == 0 && l.version < 2 || n > uint64(d.size-d.pos())/minSlotBytes || cur < math.MinInt64/4 || cur > math.MaxInt64/4 {
		d.fail("series %+q/%+q: %d slots, current %d", clipName(metric), clipName(key), n, cur)
		return nil
	}
	// The store's ring bounds the slots, so a series costs at most what the store's own would.
	if rc := l.s.RingConfig(metric); n > uint64(rc.Slots)+uint64(rc.aheadSlots()) {
		return fmt.Errorf("%w: %s: %d slots, this store's rings hold %d", ErrSnapshotShape, clipName(metric), n, rc.Slots+int(rc.aheadSlots()))
	}
	id := [2]string{metric, key}
	if _, dup := l.seen[id]; dup {
		return fmt.Errorf("%w: %+q/%+q", ErrSnapshotDuplicate, clipName(metric), clipName(key))
	}
	keep := len(l.staged) < l.s.cfg.MaxSeries
	ss := snapSeries{metric: metric, key: key, shape: shape, cur: cur}
	if keep {
		ss.slots = make([]SlotState, 0, n)
		l.seen[id] = struct{}{}
	}
	if ss.slots = l.slots(metric, key, n, keep, ss.slots); d.err != nil {
		return nil
	}
	if l.version >= 2 {
		nt := d.uvarint("tiers")
		if d.err == nil && (nt > MaxTiers || nt == 0 && n == 0) {
			d.fail("series %+q/%+q: %d tiers holding slots, %d slots", clipName(metric), clipName(key), nt, n)
		}
		rc := l.s.RingConfig(metric)
		lastT := MaxTiers // coarsest first
		for range nt {
			t := d.uvarint("tier")
			tcur := int64(d.u64("tier current slot"))
			tn := d.u32("tier slots")
			if d.err != nil {
				return nil
			}
			if t >= uint64(lastT) || tn == 0 || tn > uint64(d.size-d.pos())/minSlotBytes || tcur < math.MinInt64/4 || tcur > math.MaxInt64/4 {
				d.fail("series %+q/%+q: tier %d of %d slots, current %d", clipName(metric), clipName(key), t, tn, tcur)
				return nil
			}
			if int(t) >= len(rc.Tiers) || tn > uint64(rc.Tiers[t].Slots) {
				return fmt.Errorf("%w: %s: tier %d of %d slots, this store's rings have %d tiers", ErrSnapshotShape, clipName(metric), t+1, tn, len(rc.Tiers))
			}
			lastT = int(t)
			st := snapTier{t: int(t), cur: tcur}
			if st.slots = l.slots(metric, key, tn, keep, nil); d.err != nil {
				return nil
			}
			if keep {
				ss.tiers = append(ss.tiers, st)
			}
		}
	}
	if l.version >= 3 {
		if err := l.exemplars(&ss, keep); err != nil || d.err != nil {
			return err
		}
	}
	if keep {
		l.staged = append(l.staged, ss)
	} else {
		l.dropped++
	}
	return nil
}

// slots reads n slots of a series' ring or tier, appending them to into when keep. Each
// slot's Idx is its distance below the last, as encoded; bins of 0 bytes are none (nil).
func (l *snapLoad) slots(metric, key string, n uint64, keep bool, into []SlotState) []SlotState {
	d := &l.d
	if keep && into == nil {
		into = make([]SlotState, 0, n)
	}
	lastBack := uint64(math.MaxUint64)
	for range n {
		back := d.uvarint("slot index")
		st := SlotState{Count: d.uvarint("count"), Sum: d.float("sum"), Min: d.float("min"), Max: d.float("max")}
		binsLen := d.u32("bins length")
		if d.err == nil && binsLen > maxSnapshotBins {
			d.fail("series %+q/%+q: %d bytes of bins", clipName(metric), clipName(key), binsLen)
		}
		raw := d.bytes("bins", binsLen)
		if d.err != nil {
			return into
		}
		if back >= lastBack || st.Count == 0 || !finite(st.Sum, st.Min, st.Max) || st.Min > st.Max || binsLen == 0 && l.version < 2 {
			d.fail("series %+q/%+q: slot %d below the last: bad index, count or values", clipName(metric), clipName(key), back)
			return into
		}
		lastBack = back
		st.Idx = int64(min(back, 1<<62))
		if binsLen > 0 {
			bins := &l.scratch
			if err := bins.UnmarshalBinary(raw); err != nil || bins.Count() != st.Count {
				d.fail("series %+q/%+q: slot %d below the last: bins: %v", clipName(metric), clipName(key), back, err)
				return into
			}
			if keep {
				// Packed now, as the store keeps a past slot: staged open, every slot of
				// the snapshot held about 3× its stored size until the last was read.
				b := *bins
				st.packed = sketch.SlotOf(&b)
				st.packed.Pack()
			}
		}
		if keep {
			into = append(into, st)
		}
	}
	return into
}

// name reads a metric, or a key as its series string, held to the door's rules: at most max
// bytes (checked before they are read), a metric ValidName, a key and its labels as
// AppendSeries writes them (CheckSeries) with the key at most MaxNameLen bytes.
func (l *snapLoad) name(what string, max int) (string, error) {
	d := &l.d
	n := d.uvarint(what)
	if d.err == nil && n > uint64(max) && n <= uint64(d.size-d.pos()) {
		return "", fmt.Errorf("%w: a %s of %d bytes, at most %d", ErrSnapshotNameLength, what, n, max)
	}
	b := d.bytes(what, n)
	switch {
	case d.err != nil:
		return "", nil
	case n == 0:
		d.fail("empty %s", what)
		return "", nil
	case what != "key":
		if !ValidNameBytes(b) {
			return "", fmt.Errorf("%w: %s %+q", ErrSnapshotName, what, clipName(string(b)))
		}
		return string(b), nil
	}
	s := string(b)
	if k := SeriesKeyOf(s); len(k) > l.lim.MaxNameLen {
		return "", fmt.Errorf("%w: a key of %d bytes, at most %d", ErrSnapshotNameLength, len(k), l.lim.MaxNameLen)
	}
	if CheckSeries(s, l.lim.MaxNameLen) != nil {
		return "", fmt.Errorf("%w: %s %+q", ErrSnapshotName, what, clipName(s))
	}
	return s, nil
}

// resolve finishes the staged series with the shape table: each slot's index, the ring's
// shape against the store's, and no slot ahead of now by more than the store's skew.
func (l *snapLoad) resolve() error {
	for i := range l.staged {
		ss := &l.staged[i]
		if ss.shape >= uint64(len(l.shapes)) {
			return fmt.Errorf("%w: series %+q/%+q: shape %d of %d", ErrSnapshotCorrupt, clipName(ss.metric), clipName(ss.key), ss.shape, len(l.shapes))
		}
		sp := l.shapes[ss.shape]
		span := sp.slots + sp.ahead
		if int64(len(ss.slots)) > span {
			return fmt.Errorf("%w: series %+q/%+q: %d slots in a ring of %d", ErrSnapshotCorrupt, clipName(ss.metric), clipName(ss.key), len(ss.slots), span)
		}
		for j := range ss.slots {
			st := &ss.slots[j]
			if st.Idx >= span || !st.hasBins() != sp.rc.NoSketch {
				return fmt.Errorf("%w: series %+q/%+q: slot %d below the last of %d, bins %v", ErrSnapshotCorrupt, clipName(ss.metric), clipName(ss.key), st.Idx, span, st.hasBins())
			}
			st.Idx = ss.cur + sp.ahead - st.Idx
		}
		if err := l.resolveExemplars(ss, sp, span); err != nil {
			return err
		}
		rc := l.s.RingConfig(ss.metric)
		if rc.Slot != sp.rc.Slot || rc.Slots != sp.rc.Slots || !rc.Sketch.Equal(sp.rc.Sketch) || rc.NoSketch != sp.rc.NoSketch ||
			l.version >= 2 && !slices.Equal(rc.Tiers, sp.rc.Tiers) {
			return fmt.Errorf("%w: %s: snapshot %s, store %s", ErrSnapshotShape, clipName(ss.metric), sp.rc.Spec(), rc.Spec())
		}
		limit := floorDiv(l.now+rc.Skew.Milliseconds(), rc.Slot.Milliseconds())
		if ss.cur > limit {
			return fmt.Errorf("%w: %+q/%+q: current slot %d, at now %d the last admitted is %d", ErrSnapshotFuture,
				clipName(ss.metric), clipName(ss.key), ss.cur, l.now, limit)
		}
		if len(ss.slots) > 0 {
			if newest := ss.slots[len(ss.slots)-1].Idx; newest > limit {
				return fmt.Errorf("%w: %+q/%+q: slot %d (current %d), at now %d the last admitted is %d", ErrSnapshotFuture,
					clipName(ss.metric), clipName(ss.key), newest, ss.cur, l.now, limit)
			}
		}
		for j := range ss.tiers {
			st := &ss.tiers[j]
			if st.t >= len(sp.rc.Tiers) {
				return fmt.Errorf("%w: series %+q/%+q: tier %d of a ring of %d", ErrSnapshotCorrupt, clipName(ss.metric), clipName(ss.key), st.t+1, len(sp.rc.Tiers))
			}
			t := sp.rc.Tiers[st.t]
			if w := t.Slot.Milliseconds(); st.cur > floorDiv(l.now+rc.Skew.Milliseconds(), w) {
				return fmt.Errorf("%w: %+q/%+q: tier %d current slot %d, at now %d", ErrSnapshotFuture, clipName(ss.metric), clipName(ss.key), st.t+1, st.cur, l.now)
			}
			for k := range st.slots {
				sl := &st.slots[k]
				if sl.Idx >= int64(t.Slots) || !sl.hasBins() != sp.rc.NoSketch {
					return fmt.Errorf("%w: series %+q/%+q: tier %d slot %d below the last of %d", ErrSnapshotCorrupt, clipName(ss.metric), clipName(ss.key), st.t+1, sl.Idx, t.Slots)
				}
				sl.Idx = st.cur - sl.Idx
			}
			// A tier whose newest slot no read at now can reach (Ring.tiersEmpty's bound) is
			// left out, and no far past index reaches the ring's arithmetic.
			if oldest := l.now - 2*rc.Reach().Milliseconds(); st.cur < floorDiv(oldest, t.Slot.Milliseconds()) {
				st.slots = nil
			}
		}
	}
	return nil
}

// aheadSlots is how many slots past the current one the skew can fill: Ring.ahead for rc.
func (c RingConfig) aheadSlots() int64 {
	w := c.Slot.Milliseconds()
	return (c.Skew.Milliseconds() + w - 1) / w
}

// clipName shortens a name for an error message: at most 64 bytes.
func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
