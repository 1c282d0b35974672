package window

// Deque is the monotonic deque: the candidates for the maximum (or minimum) of a window whose
// both edges only move forward, each tagged with a position (a row index for count windows, a
// timestamp for time windows). The front is the extremum of the window.
//
// Push drops from the back every candidate that the newcomer beats or equals: it is no larger
// and leaves the window sooner, so it can never be the extremum again. Expire drops from the
// front the candidates whose position has left the window. Every position is pushed once and
// dropped at most once, so a window pass over n values costs O(n) whatever the window length;
// that is why it, and not the block algorithm of MaxWindow, serves time windows, whose number
// of values varies.
//
// Positions must not decrease from one Push to the next. NaN values are not ordered: a window
// holding one has an unspecified front (callers reject NaN first).
//
// The zero value is an empty max deque, ready to use; NewMinDeque returns a min deque. Memory is
// O(candidates), at most the window length, in a ring that grows by doubling and never shrinks,
// so Push allocates nothing once the ring has reached the window's size. A Deque is not safe for
// concurrent use.
type Deque struct {
	pos  []int64
	val  []float64
	head int  // ring index of the front
	n    int  // candidates held
	min  bool // keep the minimum instead of the maximum
}

// NewMaxDeque returns an empty deque whose front is the maximum (the same as a zero Deque).
func NewMaxDeque() *Deque { return &Deque{} }

// NewMinDeque returns an empty deque whose front is the minimum.
func NewMinDeque() *Deque { return &Deque{min: true} }

// Push adds value v at position pos (pos ≥ every earlier position), first dropping the
// candidates it dominates. Amortized O(1).
func (d *Deque) Push(pos int64, v float64) {
	mask := len(d.val) - 1
	for d.n > 0 {
		b := d.val[(d.head+d.n-1)&mask]
		if d.min && b < v || !d.min && b > v {
			break
		}
		d.n--
	}
	if d.n == len(d.val) {
		d.grow()
		mask = len(d.val) - 1
	}
	i := (d.head + d.n) & mask
	d.pos[i], d.val[i] = pos, v
	d.n++
}

// grow doubles the ring (capacity stays a power of two so indices wrap with a mask).
func (d *Deque) grow() {
	d.pos, d.val, d.head = regrow(d.pos, d.head, d.n), regrow(d.val, d.head, d.n), 0
}

// regrow returns ring's n entries from head on, in order at the start of a ring twice as
// long (16 for an empty one): the growth of Deque's and Counter's power-of-two rings.
func regrow[T any](ring []T, head, n int) []T {
	out := make([]T, max(2*len(ring), 16))
	mask := len(ring) - 1
	for i := 0; i < n; i++ {
		out[i] = ring[(head+i)&mask]
	}
	return out
}

// Expire drops the front candidates whose position is ≤ through, i.e. keeps the window
// (through, …]. For a count window of k ending at row i that is Expire(i−k); for a time window
// of span W ending at now, Expire(now−W).
func (d *Deque) Expire(through int64) {
	mask := len(d.val) - 1
	for d.n > 0 && d.pos[d.head] <= through {
		d.head = (d.head + 1) & mask
		d.n--
	}
}

// Front returns the extremum of the window and its position; ok is false when the deque is
// empty.
func (d *Deque) Front() (v float64, pos int64, ok bool) {
	if d.n == 0 {
		return 0, 0, false
	}
	return d.val[d.head], d.pos[d.head], true
}

// Len returns the number of candidates held (not the window length).
func (d *Deque) Len() int { return d.n }

// Reset empties the deque, keeping its memory and kind.
func (d *Deque) Reset() { d.head, d.n = 0, 0 }
