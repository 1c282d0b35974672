package window

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Exemplars in a snapshot (version 3, StoreConfig.Exemplars): after a series' tiers, the
// number of exemplars its ring's slots hold, then each, oldest first: how far below the
// ring's last slot its slot is (a uvarint, as a slot's), its time (unix ms) and value as 8
// bytes each, its trace id (16 bytes) and span id (8). A store without exemplars writes 0
// and skips those it reads; a restore keeps them as its events would have (keepExemplar), so
// a handover or a restart keeps the exemplars of the slots before the snapshot too.

// minExemplarBytes is an encoded exemplar's least size.
const minExemplarBytes = 1 + 8 + 8 + 16 + 8

// appendSnapExemplars appends se's exemplars in its ring's slots; the caller holds sh.mu
// and has exported se's ring at the snapshot's now (its cur is the snapshot's).
func (sh *shard) appendSnapExemplars(b []byte, se *series) []byte {
	if !se.exemplar {
		return append(b, 0)
	}
	r := &se.ring
	ex := sh.ex[se]
	last := r.cur + r.ahead()
	n := 0
	for i := last - r.size + 1; i <= last; i++ {
		if ex[r.pos(i)].idx == i {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for i := last - r.size + 1; i <= last; i++ {
		e := &ex[r.pos(i)]
		if e.idx != i {
			continue
		}
		b = binary.AppendUvarint(b, uint64(last-i))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.TS))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.Value))
		b = append(b, e.TraceID[:]...)
		b = append(b, e.SpanID[:]...)
	}
	return b
}

// exemplars reads a series' exemplars (version 3) and stages them in ss when keep and the
// store keeps exemplars; each one's idx is its distance below the ring's last slot until
// resolveExemplars. The returned error is an admission refusal; the decoder's own is a
// corrupt snapshot.
func (l *snapLoad) exemplars(ss *snapSeries, keep bool) error {
	d := &l.d
	n := d.uvarint("exemplars")
	if d.err != nil {
		return nil
	}
	if n > uint64(d.size-d.pos())/minExemplarBytes {
		d.fail("series %+q/%+q: %d exemplars", clipName(ss.metric), clipName(ss.key), n)
		return nil
	}
	if rc := l.s.RingConfig(ss.metric); n > uint64(rc.Slots)+uint64(rc.aheadSlots()) {
		return fmt.Errorf("%w: %s: %d exemplars, this store's rings hold %d slots", ErrSnapshotShape, clipName(ss.metric), n, rc.Slots+int(rc.aheadSlots()))
	}
	keep = keep && l.s.cfg.Exemplars
	lastBack := uint64(math.MaxUint64)
	for range n {
		back := d.uvarint("exemplar slot")
		var e exemplarSlot
		e.TS = int64(d.u64("exemplar time"))
		e.Value = d.float("exemplar value")
		copy(e.TraceID[:], d.bytes("trace id", 16)) // copied at once: a stream's next read may reuse its buffer
		copy(e.SpanID[:], d.bytes("span id", 8))
		if d.err != nil {
			return nil
		}
		if back >= lastBack || !finite(e.Value) || e.TraceID == [16]byte{} {
			d.fail("series %+q/%+q: exemplar %d below the last slot: bad index, value or trace id", clipName(ss.metric), clipName(ss.key), back)
			return nil
		}
		lastBack = back
		e.idx = int64(min(back, 1<<62))
		if keep {
			ss.ex = append(ss.ex, e)
		}
	}
	return nil
}

// resolveExemplars gives ss's staged exemplars their slot index in a ring of shape sp (span
// slots with its ahead ones): each must be in a slot of the ring, its time in its slot.
func (l *snapLoad) resolveExemplars(ss *snapSeries, sp snapShape, span int64) error {
	width := sp.rc.Slot.Milliseconds()
	for j := range ss.ex {
		e := &ss.ex[j]
		if e.idx >= span {
			return fmt.Errorf("%w: series %+q/%+q: exemplar %d below the last slot of %d", ErrSnapshotCorrupt, clipName(ss.metric), clipName(ss.key), e.idx, span)
		}
		e.idx = ss.cur + sp.ahead - e.idx
		if floorDiv(e.TS, width) != e.idx {
			return fmt.Errorf("%w: series %+q/%+q: exemplar at %d in slot %d", ErrSnapshotCorrupt, clipName(ss.metric), clipName(ss.key), e.TS, e.idx)
		}
	}
	return nil
}
