package sketch

// AppendBins appends the non-zero bins of one side of s (negative: the magnitudes of the
// negative values) to dst in ascending index order, as Bins.AppendBins appends those of the
// counts s holds, and returns it. A packed slot is read straight from its encoding: no
// decode into scratch, no scan of empty bins.
func (s Slot) AppendBins(dst []BinCount, negative bool) []BinCount {
	switch {
	case s.p == nil:
		return dst
	case !s.IsPacked():
		return s.Bins().AppendBins(dst, negative)
	}
	d := packedReader{b: s.packed()}
	d.uvarint() // the zero count
	side := func(n int, keep bool) {
		rs, off := d.side(n)
		var buf [riceBatch]uint64
		for i := off; rs.left > 0; {
			m := rs.next(&buf)
			if keep {
				for j, x := range buf[:m] {
					if x > 0 {
						dst = append(dst, BinCount{Index: i + j, Count: x})
					}
				}
			}
			i += m
		}
		d.done(&rs)
	}
	if n := int(d.uvarint()); n > 0 {
		side(n, negative)
	}
	if negative {
		return dst
	}
	if n := int(d.uvarint()); n > 0 {
		side(n, true)
	}
	return dst
}

// ZeroCount is the number of values of magnitude at most the Indexer's MinIndexableValue in
// s, as Bins.ZeroCount of its counts.
func (s Slot) ZeroCount() uint64 {
	switch {
	case s.p == nil:
		return 0
	case !s.IsPacked():
		return s.Bins().ZeroCount()
	}
	d := packedReader{b: s.packed()}
	return d.uvarint()
}
