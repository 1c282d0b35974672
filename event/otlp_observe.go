package event

// observeAll is the intake's path for a body of spans: the body read whole, its spans' events
// observed together (window.Store.ObserveFromAll for a Kafka record, ObserveAtAll for an
// HTTP request's body: a series locked and found once for all its spans), then each refusal
// handed to refused in the spans' order, as DecodeLines and ObserveFrom (ObserveAt) one span
// at a time would. It returns the number of spans (or 1 for a body refused whole).
func (s *SpanDecoder) observeAll(body []byte, o *observer, refused func([]byte, Reason)) int {
	if len(body) == 0 {
		return 0
	}
	s.read(body)
	evs := s.evs[:0]
	for k := range s.pending {
		if p := &s.pending[k]; p.r == ReasonNone {
			p.ev.Feed = o.feed
			evs = append(evs, &p.ev)
		}
	}
	if cap(s.errs) < len(evs) {
		s.errs = make([]error, len(evs), cap(evs))
	}
	errs := s.errs[:len(evs)]
	clear(errs)
	if o.hasSrc {
		o.in.store.ObserveFromAll(o.now, o.src, evs, errs)
	} else {
		o.in.store.ObserveAtAll(o.now, evs, errs)
	}
	s.emit = true // a part handed to refused may be given back (Intake.Explain)
	j := 0
	for k := range s.pending {
		p := &s.pending[k]
		r := p.r
		if r == ReasonNone {
			err := errs[j]
			j++
			if err == nil {
				o.accepted++
				continue
			}
			r = ReasonOf(err)
		}
		refused(p.part, r)
	}
	s.emit = false
	clear(evs) // the pending spans are the decoder's; no pointer into them outlives the body
	s.evs = evs[:0]
	return len(s.pending)
}
