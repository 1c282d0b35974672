package window

import "unsafe"

// ObserveFromAll is ObserveFrom of each event of evs in turn, with the same results (errs[i]
// is evs[i]'s; errs must be at least as long as evs) and the same store after it, for the
// events of one Kafka record: a series is hashed, locked and found once for all of its events
// instead of once per event. An OTLP record of 80 spans holds a few series, and those three
// steps were two fifths of a span's cost in the store.
//
// Each series takes its events in their order, so its sums are added in the same order as
// ObserveFrom's, bit for bit. What one series' event does to another is create a series under
// the caps (MaxSeries, a metric's cap), so series are taken in the order of their first event,
// each created (or refused) at it, as ObserveFrom would; when a new series' first event is
// refused, a later one may still create it after other series were created, so the events
// from there on are observed one at a time, in order.
func (s *Store) ObserveFromAll(now int64, src Source, evs []*Event, errs []error) {
	for base := 0; base < len(evs); {
		base += s.observeBlock(now, &src, evs[base:], errs[base:])
	}
	for i, err := range errs[:len(evs)] {
		if err != nil && err != ErrEmptyKey { // ObserveFrom returns it as it is
			errs[i] = s.fromErr(err)
		}
	}
}

// ObserveAtAll is ObserveAt of each event of evs in turn, with the same results (errs[i] is
// evs[i]'s; errs must be at least as long as evs), the same Stats and the same store after
// it, grouped by series as ObserveFromAll groups a record's: the spans of one OTLP request
// over HTTP (POST /v1/events, POST /v1/traces), which has no Kafka record to judge them by.
func (s *Store) ObserveAtAll(now int64, evs []*Event, errs []error) {
	for base := 0; base < len(evs); {
		base += s.observeBlock(now, nil, evs[base:], errs[base:])
	}
	for _, err := range errs[:len(evs)] {
		if err != nil {
			s.countErr(err) // as ObserveAt counts it
		}
	}
}

// groupsMax is the most series observeBlock groups at once.
const groupsMax = 32

// observeBlock is ObserveFromAll of the first events of evs (at most 256, and until a 33rd
// series): one pass links each event to the next of its series (a small table by the key's
// address finds an event's series, the decoder having interned it; a series first met is
// compared by its bytes with the others, so two copies of one key are still one series), then
// each series, in the order of its first event, is locked and found once and takes its
// events down the links. It returns how many events it observed, and leaves the errors
// unconverted (fromErr). A nil src is ObserveAt's judgement (ObserveAtAll), else ObserveFrom's.
func (s *Store) observeBlock(now int64, src *Source, evs []*Event, out []error) int {
	const tableLen = 2 * groupsMax // at most half full
	type group struct {
		key, metric string
		first, last int16
	}
	var (
		groups [groupsMax]group // in the order of their first event
		ng     int
		table  [tableLen]int8 // 1 + a group, by a hash of its key's address; 0 free
		next   [256]int16     // the next event of the event's series, −1 none
		done   [256 / 64]uint64
	)
	n := min(len(evs), len(next))
	for i, ev := range evs[:n] {
		at := int((uintptr(unsafe.Pointer(unsafe.StringData(ev.Key)))>>3)*0x9E3779B1>>7) % tableLen
		g := -1
		for ; table[at] != 0; at = (at + 1) % tableLen {
			if gr := &groups[table[at]-1]; unsafe.StringData(gr.key) == unsafe.StringData(ev.Key) && len(gr.key) == len(ev.Key) && sameString(gr.metric, ev.Metric) {
				g = int(table[at] - 1)
				break
			}
		}
		if g < 0 {
			for k := range ng { // the same series under another address
				if gr := &groups[k]; gr.key == ev.Key && gr.metric == ev.Metric {
					g = k
					break
				}
			}
		}
		next[i] = -1
		if g >= 0 {
			next[groups[g].last] = int16(i)
			groups[g].last = int16(i)
			continue
		}
		if ng == groupsMax {
			n = i // the rest in the next block
			break
		}
		groups[ng] = group{key: ev.Key, metric: ev.Metric, first: int16(i), last: int16(i)}
		ng++
		table[at] = int8(ng)
	}
	for g := range ng {
		i := int(groups[g].first)
		ev := evs[i]
		if ev.Metric == "" || ev.Key == "" {
			for ; i >= 0; i = int(next[i]) {
				out[i] = ErrEmptyKey
				done[i>>6] |= 1 << (i & 63)
			}
			continue
		}
		h := s.hash(ev.Metric, ev.Key)
		sh := &s.shards[h&s.mask]
		sh.mu.Lock()
		se := sh.lookup(h, ev.Metric, ev.Key)
		if se == nil {
			if src == nil {
				out[i] = s.observeNewAt(sh, h, now, ev)
			} else {
				out[i] = s.observeNewFrom(sh, h, now, *src, *ev)
			}
			done[i>>6] |= 1 << (i & 63)
			if se = sh.lookup(h, ev.Metric, ev.Key); se == nil {
				sh.mu.Unlock()
				for j := i + 1; j < n; j++ { // refused as new: the rest in order (above)
					if done[j>>6]&(1<<(j&63)) == 0 {
						out[j] = s.observeOne(now, src, evs[j])
					}
				}
				return n
			}
			i = int(next[i])
		}
		for ; i >= 0; i = int(next[i]) {
			if src == nil {
				out[i] = observeSeriesAt(sh, se, now, evs[i])
			} else {
				out[i] = observeSeries(sh, se, now, *src, evs[i])
			}
			done[i>>6] |= 1 << (i & 63)
		}
		sh.mu.Unlock()
	}
	return n
}

// observeOne is ObserveFrom (ObserveAt for a nil src) without its counting or conversion of
// the error (fromErr, countErr).
func (s *Store) observeOne(now int64, src *Source, ev *Event) error {
	if ev.Metric == "" || ev.Key == "" {
		return ErrEmptyKey
	}
	h := s.hash(ev.Metric, ev.Key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	se := sh.lookup(h, ev.Metric, ev.Key)
	switch {
	case src == nil && se != nil:
		return observeSeriesAt(sh, se, now, ev)
	case src == nil:
		return s.observeNewAt(sh, h, now, ev)
	case se != nil:
		return observeSeries(sh, se, now, *src, ev)
	}
	return s.observeNewFrom(sh, h, now, *src, *ev)
}

// observeSeriesAt is ObserveAt's observation of ev into its existing series se, under sh.mu,
// without counting a refusal. ObserveAt keeps its own copy of these lines: its hot path
// makes no call for them.
func observeSeriesAt(sh *shard, se *series, now int64, ev *Event) error {
	var err error
	if ev.Value-ev.Value != 0 || !se.ring.addCurrent(now, ev.TS, ev.Value, ev.Count) { // NaN and ±Inf give NaN
		err = se.ring.Add(now, ev.TS, ev.Value, ev.Count)
	}
	if err == nil {
		se.partition = ev.Feed.Partition()
		if sh.exOn {
			sh.exemplar(se, ev)
		}
	}
	if se.watched { // even refused: Add may have moved the ring's time
		sh.touch(se)
	}
	return err
}

// observeNewAt is ObserveAt's new series, under sh.mu, without counting a refusal: created,
// then taken out again when its first event is refused, so that it holds no place under the
// caps.
func (s *Store) observeNewAt(sh *shard, h uint64, now int64, ev *Event) error {
	se, err := s.create(sh, h, *ev)
	if err != nil {
		return err
	}
	if ev.Value-ev.Value != 0 || !se.ring.addCurrent(now, ev.TS, ev.Value, ev.Count) {
		err = se.ring.Add(now, ev.TS, ev.Value, ev.Count)
	}
	if err != nil {
		s.unlinkNew(sh, h, se)
		return err
	}
	se.partition = ev.Feed.Partition()
	if sh.exOn {
		sh.exemplar(se, ev)
	}
	if se.watched {
		sh.touch(se)
	}
	return nil
}

// observeSeries is ObserveFrom's observation of ev into its existing series se, under sh.mu.
func observeSeries(sh *shard, se *series, now int64, src Source, ev *Event) error {
	r := &se.ring
	var err error
	if ev.Value-ev.Value != 0 || !r.judgeCannotRefuse(now, src, ev.TS) || !r.addCurrent(now, ev.TS, ev.Value, ev.Count) { // NaN and ±Inf give NaN
		err = r.addFrom(now, src, ev.TS, ev.Value, ev.Count)
	}
	if err == nil {
		se.partition = ev.Feed.Partition()
		if sh.exOn {
			sh.exemplar(se, ev)
		}
	}
	if se.watched {
		sh.touch(se)
	}
	return err
}
