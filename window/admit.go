package window

import (
	"errors"
	"math"
)

// ErrExpired is returned by ObserveFrom for an event inside its source's window (see
// Source) but older than the retention at the store's now: lag, or a replay reaching further
// back than the metric keeps. Stats count it as Late.
var ErrExpired = errors.New("window: event in its source's window, older than the retention at now")

// Source is where an event comes from: the timestamp (unix ms) of its Kafka record, which is
// part of the log, so that every replay of the log judges the event the same way.
//
// ObserveFrom judges the event's time against two references derived from it with the
// ring's skew: future when the time is beyond futureRef by more than the skew, late when its
// slot is a retention or more before lateRef's slot. While the record's timestamp agrees with
// now to within the skew, both are the record's timestamp. A record stamped more than the
// skew ahead of now comes from a producer clock that is ahead: both are now, so correctly
// stamped events are not refused as late. A record stamped more than the skew behind now is
// lag, a replay, or a producer clock that is behind: an event ahead of its record but not of
// now is not future, so futureRef is now, while lateRef stays the record's timestamp (replays
// refuse the same late events).
type Source struct {
	RecordTS int64
}

// refs returns the future and late references of src at now for a ring of skew skew.
func (src Source) refs(now, skew int64) (futureRef, lateRef int64) {
	switch {
	case src.RecordTS > now+skew:
		return now, now
	case src.RecordTS < now-skew:
		return now, src.RecordTS
	}
	return src.RecordTS, src.RecordTS
}

// ObserveFrom records ev as ObserveAt does, but judges its time once, in the ring: ErrFuture
// or ErrLate against src (not counted in Stats: the source refused them, as a consumer that
// judged them itself would), then ErrInvalidValue, then ErrFuture or ErrExpired against now
// (counted). It is ingest's hot path: for an event in the current slot of a record stamped
// in it, the checks are compares with no division. ev is passed by pointer (and not kept):
// by value, with now and src it takes more than Go's nine integer argument registers, and
// the whole Event went through memory on every call, about 10 ns of the hot path. Its series
// lookup is ObserveAt's, written again on purpose: the hot path makes no call for it.
func (s *Store) ObserveFrom(now int64, src Source, ev *Event) error {
	if ev.Metric == "" || ev.Key == "" {
		return ErrEmptyKey
	}
	h := s.hash(ev.Metric, ev.Key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	se := sh.lookup(h, ev.Metric, ev.Key)
	var err error
	if se != nil {
		r := &se.ring
		if ev.Value-ev.Value != 0 || !r.judgeCannotRefuse(now, src, ev.TS) || !r.addCurrent(now, ev.TS, ev.Value, ev.Count) { // NaN and ±Inf give NaN
			err = se.ring.addFrom(now, src, ev.TS, ev.Value, ev.Count)
		}
		if err == nil {
			se.partition = ev.Feed.Partition()
			if sh.exOn {
				sh.exemplar(se, ev)
			}
		}
		if se.watched { // even refused: addFrom may have moved the ring's time
			sh.touch(se)
		}
		sh.mu.Unlock()
	} else {
		err = s.observeNewFrom(sh, h, now, src, *ev)
		sh.mu.Unlock()
	}
	if err != nil {
		return s.fromErr(err)
	}
	return nil
}

// observeNewFrom is ObserveFrom's new series, under sh.mu: judged against the source once,
// by the shape of the ring it would get, before it exists, so a refused event creates
// nothing (and is refused as the source's, not at the series cap). Kept out of ObserveFrom
// so that the hot path stays small enough for the compiler to inline its hash and unlock.
//
//go:noinline
func (s *Store) observeNewFrom(sh *shard, h uint64, now int64, src Source, ev Event) error {
	if err := shapeOf(s.RingConfig(ev.Metric)).judge(now, src, ev.TS, false, 0); err != nil {
		return err
	}
	se, err := s.create(sh, h, ev)
	if err != nil {
		return err
	}
	r := &se.ring
	r.advance(now)
	if err = r.addJudged(now, ev.TS, ev.Value, ev.Count); err != nil { // unlinkNew unindexes it
		s.unlinkNew(sh, h, se)
		return err
	}
	se.partition = ev.Feed.Partition()
	if sh.exOn {
		sh.exemplar(se, &ev)
	}
	if se.watched {
		sh.touch(se)
	}
	return nil
}

// fromErr counts ObserveFrom's refusal err and names it for the caller.
func (s *Store) fromErr(err error) error {
	switch err {
	case errSourceFuture:
		return ErrFuture
	case errSourceLate:
		return ErrLate
	case ErrExpired:
		s.late.Add(1)
	default:
		s.countErr(err)
	}
	return err
}

// Refusals against the source, told apart from the ring's own so Stats skip them.
var (
	errSourceFuture = errors.New("window: future at source")
	errSourceLate   = errors.New("window: late at source")
)

// judge checks ts against src's references at now with the ring's slot arithmetic. It does
// not advance the ring.
func (r *Ring) judge(now int64, src Source, ts int64) error {
	return r.ringShape.judge(now, src, ts, r.started, r.curLo)
}

// judge is Ring.judge for a ring of this shape whose current slot starts at curLo (when
// started; a ring that has none, or does not exist yet, is judged by the references alone).
func (g ringShape) judge(now int64, src Source, ts int64, started bool, curLo int64) error {
	futureRef, lateRef := src.refs(now, g.skewMs)
	if ts > futureRef+g.skewMs {
		return errSourceFuture
	}
	if started && ts >= curLo && lateRef < curLo+g.width {
		return nil // ts at or after the current slot, the reference not after it: not late
	}
	if floorDiv(ts, g.width) <= floorDiv(lateRef, g.width)-g.n {
		return errSourceLate
	}
	return nil
}

// judgeCannotRefuse is addFrom's fast path's test: with it, addCurrent may take the event
// without judge. Under addCurrent's conditions (now and ts in the current slot, ts at most the
// skew ahead of now) judge passes unless the record's timestamp agrees with now to within the
// skew and the event is more than the skew ahead of it, or the record is stamped past the
// current slot: for those it returns false, and the full path judges.
func (r *Ring) judgeCannotRefuse(now int64, src Source, ts int64) bool {
	rts := src.RecordTS
	return rts < now-r.skewMs || rts > now+r.skewMs || ts <= rts+r.skewMs && rts < r.curLo+r.width
}

// addFrom is Add after the source's checks (judge), with ErrExpired for an event older than
// the retention at now.
func (r *Ring) addFrom(now int64, src Source, ts int64, v float64, n uint64) error {
	if !r.started || now < r.curLo || now >= r.curLo+r.width {
		r.advance(now) // the common case, still in the current slot, makes no call
	}
	if err := r.judge(now, src, ts); err != nil {
		return err
	}
	return r.addJudged(now, ts, v, n)
}

// addJudged is addFrom once the ring has advanced to now and the source has judged ts.
func (r *Ring) addJudged(now, ts int64, v float64, n uint64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ErrInvalidValue
	}
	if r.addCurrent(now, ts, v, n) {
		return nil
	}
	if n == 0 {
		n = 1
	}
	return r.place(now, ts, v, n, ErrExpired)
}
