package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/slide-metrics/slide/window"
)

// ErrCorrupt wraps every failure to decode a peer's answer.
var ErrCorrupt = errors.New("cluster: corrupt peer answer")

// answerVersion is the first byte of a peer answer.
const answerVersion = 1

// maxDecodeItems bounds the series or keys one answer may announce, so a hostile length
// prefix cannot make the decoder allocate: each item takes at least two bytes anyway.
const maxDecodeItems = 1 << 24

// answer is what a peer sends back for one internal read: the partitions it served, then
// one of a merged partial (opMerge), one partial per series (opSeries), series names
// (opKeys), one partial per group (opGroups), each series' slots (opSlots), metric names
// (opMetrics), each series' exemplars (opExemplars) or each series' current and first
// slot (opExtents). Encoding, all integers varints:
//
//	version(1) nserved served...  then
//	opMerge:  partial
//	opSeries: n (key partial)*n
//	opKeys:   n (metric key)*n   (sorted when the request had a cursor or limit)
//	opGroups: over(1) nby n (value*nby partial)*n   (over 1: more than window.MaxGroups, n 0)
//	opSlots:  n (series cur nslots slot*nslots)*n   (see slots.go)
//	opMetrics: n metric*n
//	opExemplars: n (series nex exemplar*nex)*n   (see exemplars.go)
//	opExtents: n (series cur back)*n   (see extents.go)
//	partial:  from to series count [sum min max (8 bytes each, little endian) hasBins (bins)]
//	string:   len bytes; bins: len sketch.Bins.MarshalBinary
type answer struct {
	served    []int32
	merged    window.Partial
	series    []keyed
	keys      []window.SeriesID
	groups    []valued
	slots     []slotSeries     // opSlots: each series' slots (see slots.go)
	names     []string         // opMetrics: metric names
	exemplars []exemplarSeries // opExemplars: each series' exemplars (see exemplars.go)
	extents   []extentSeries   // opExtents: each series' current and first slot (see extents.go)
	nby       int              // opGroups: the number of by-labels, each group's values
	over      bool             // opGroups: the peer's series fell in too many groups
}

// valued is one group of an opGroups answer: the values of its by-labels and its partial.
type valued struct {
	values []string
	p      window.Partial
}

// appendMatcher writes m as an opGroups request carries it (a value of "m"): the operator's
// digit, the name, '=', the value. A label name holds no '='.
func appendMatcher(b []byte, m window.Matcher) string {
	b = append(b, byte('0'+m.Op))
	b = append(b, m.Name...)
	b = append(b, '=')
	return string(append(b, m.Value...))
}

// parseMatcher reads what appendMatcher wrote.
func parseMatcher(s string) (window.Matcher, bool) {
	if len(s) < 2 || s[0] < '0' || s[0] > '9' {
		return window.Matcher{}, false
	}
	name, value, ok := strings.Cut(s[1:], "=")
	return window.Matcher{Name: name, Op: window.MatchOp(s[0] - '0'), Value: value}, ok
}

type keyed struct {
	key string
	p   window.Partial
}

func appendServed(b []byte, served []int32) []byte {
	b = append(b, answerVersion)
	b = binary.AppendUvarint(b, uint64(len(served)))
	for _, p := range served {
		b = binary.AppendVarint(b, int64(p))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendPartial(b []byte, p *window.Partial) []byte {
	b = binary.AppendVarint(b, p.From)
	b = binary.AppendVarint(b, p.To)
	b = binary.AppendUvarint(b, uint64(p.Series))
	b = binary.AppendUvarint(b, p.Count)
	if p.Count == 0 {
		return b
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Sum))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Min))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Max))
	if p.NoBins {
		return append(b, 0)
	}
	bins, _ := p.Bins.MarshalBinary() // never fails
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(bins)))
	return append(b, bins...)
}

// reader decodes an answer; the first error sticks.
type reader struct {
	p   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.p)
	if n <= 0 {
		r.fail("reading %s: bad varint", what)
		return 0
	}
	r.p = r.p[n:]
	return x
}

// varint reads a signed varint as binary.Varint does: the zig-zag of an unsigned one,
// read (errors and all) by uvarint.
func (r *reader) varint(what string) int64 {
	u := r.uvarint(what)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.p)) {
		r.fail("%s: %d bytes announced, %d left", what, n, len(r.p))
		return nil
	}
	b := r.p[:n]
	r.p = r.p[n:]
	return b
}

func (r *reader) float(what string) float64 {
	if r.err != nil {
		return 0
	}
	if len(r.p) < 8 {
		r.fail("reading %s: short input", what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.p))
	r.p = r.p[8:]
	return v
}

func (r *reader) count(what string) int {
	n := r.uvarint(what)
	if r.err == nil && (n > maxDecodeItems || n > uint64(len(r.p))) {
		r.fail("%s: %d announced in %d bytes", what, n, len(r.p))
		return 0
	}
	return int(n)
}

func (r *reader) partial(p *window.Partial) {
	p.From = r.varint("from")
	p.To = r.varint("to")
	series := r.uvarint("series")
	p.Count = r.uvarint("count")
	if series > math.MaxInt32 {
		r.fail("series %d out of range", series)
	}
	p.Series = int(series)
	if r.err != nil || p.Count == 0 {
		return
	}
	p.Sum, p.Min, p.Max = r.float("sum"), r.float("min"), r.float("max")
	if r.err != nil {
		return
	}
	if math.IsNaN(p.Sum) || math.IsNaN(p.Min) || math.IsNaN(p.Max) || p.Min > p.Max {
		r.fail("sum %v, min %v, max %v: not a window aggregate", p.Sum, p.Min, p.Max)
		return
	}
	if len(r.p) == 0 {
		r.fail("reading the bins flag: short input")
		return
	}
	has := r.p[0]
	r.p = r.p[1:]
	switch has {
	case 0:
		p.NoBins = true
	case 1:
		bins := r.bytes("bins")
		if r.err == nil {
			if err := p.Bins.UnmarshalBinary(bins); err != nil {
				r.fail("%v", err)
			}
		}
	default:
		r.fail("bins flag %d", has)
	}
}

func (r *reader) served() []int32 {
	if len(r.p) == 0 {
		r.fail("empty answer")
		return nil
	}
	if r.p[0] != answerVersion {
		r.fail("version %d, want %d", r.p[0], answerVersion)
		return nil
	}
	r.p = r.p[1:]
	n := r.count("served partitions")
	out := make([]int32, 0, n)
	for range n {
		v := r.varint("partition")
		if v < 0 || v > math.MaxInt32 {
			r.fail("partition %d out of range", v)
		}
		if r.err != nil {
			return nil
		}
		out = append(out, int32(v))
	}
	return out
}

func (r *reader) done() error {
	if r.err == nil && len(r.p) > 0 {
		r.fail("%d trailing bytes", len(r.p))
	}
	if r.err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, r.err)
	}
	return nil
}

// decodeAnswer decodes a peer's answer to op. It never panics and allocates in proportion
// to len(b).
func decodeAnswer(op string, b []byte) (answer, error) {
	r := &reader{p: b}
	var a answer
	a.served = r.served()
	switch op {
	case opMerge:
		r.partial(&a.merged)
	case opSeries:
		n := r.count("series")
		a.series = make([]keyed, 0, n)
		for range n {
			k := string(r.bytes("key"))
			var p window.Partial
			r.partial(&p)
			if r.err != nil {
				break
			}
			a.series = append(a.series, keyed{key: k, p: p})
		}
	case opGroups:
		if len(r.p) == 0 {
			r.fail("reading the over flag: short input")
			break
		}
		a.over = r.p[0] == 1
		if r.p[0] > 1 {
			r.fail("over flag %d", r.p[0])
		}
		r.p = r.p[1:]
		nby := int(min(r.uvarint("by"), maxPeerBy+1)) // not a count of what follows: 0 groups carry none
		if nby > maxPeerBy {
			r.fail("more than %d by-labels", maxPeerBy)
		}
		a.nby = nby
		n := r.count("groups")
		a.groups = make([]valued, 0, min(n, len(r.p)/max(nby, 1)))
		for range n {
			g := valued{values: make([]string, nby)}
			for i := range g.values {
				g.values[i] = string(r.bytes("value"))
			}
			r.partial(&g.p)
			if r.err != nil {
				break
			}
			a.groups = append(a.groups, g)
		}
	case opKeys:
		n := r.count("keys")
		a.keys = make([]window.SeriesID, 0, n)
		for range n {
			m := string(r.bytes("metric"))
			k := string(r.bytes("key"))
			if r.err != nil {
				break
			}
			a.keys = append(a.keys, window.SeriesID{Metric: m, Key: k})
		}
	case opSlots:
		a.slots = r.slotSeriesList()
	case opExemplars:
		a.exemplars = r.exemplarSeriesList()
	case opExtents:
		a.extents = r.extentList()
	case opMetrics:
		n := r.count("metrics")
		a.names = make([]string, 0, n)
		for range n {
			m := string(r.bytes("metric"))
			if r.err != nil {
				break
			}
			a.names = append(a.names, m)
		}
	default:
		r.fail("unknown op %q", op)
	}
	return a, r.done()
}
