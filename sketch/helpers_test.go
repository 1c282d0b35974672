package sketch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// dist generates test data; every generator is seeded so runs are repeatable.
type dist struct {
	name string
	gen  func(r *rand.Rand) float64
}

// dists are the distributions the accuracy tests cover. Latencies are in ms.
var dists = []dist{
	{"lognormal", func(r *rand.Rand) float64 { return math.Exp(math.Log(50) + 1.0*r.NormFloat64()) }},
	{"pareto", func(r *rand.Rand) float64 { return 10 / math.Pow(1-r.Float64(), 1/1.5) }}, // xm=10, alpha=1.5: heavy tail
	{"bimodal", func(r *rand.Rand) float64 {
		if r.IntN(10) < 7 { // 70% fast path around 5 ms, 30% slow path around 400 ms
			return math.Exp(math.Log(5) + 0.3*r.NormFloat64())
		}
		return math.Exp(math.Log(400) + 0.4*r.NormFloat64())
	}},
	{"constant", func(*rand.Rand) float64 { return 87.5 }},
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// lognormalSlots returns slots × per lognormal latencies (ms), as the
// benchmarks and the memory test use.
func lognormalSlots(seed uint64, slots, per int) [][]float64 {
	r := newRand(seed)
	out := make([][]float64, slots)
	for i := range out {
		out[i] = make([]float64, per)
		for j := range out[i] {
			out[i][j] = math.Exp(math.Log(50) + 1.0*r.NormFloat64())
		}
	}
	return out
}

// exactAtRank returns the sample DDSketch's rank semantics target:
// sorted[floor(q*(n-1))]. sorted must be sorted ascending.
func exactAtRank(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}

func relErr(got, want float64) float64 {
	if want == 0 {
		return math.Abs(got)
	}
	return math.Abs(got-want) / math.Abs(want)
}

func mustIndexer(t testing.TB, k Kind) Indexer {
	t.Helper()
	ix, err := k.Indexer()
	if err != nil {
		t.Fatalf("%v.Indexer(): %v", k, err)
	}
	return ix
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// model is the reference for Bins: exact counts per bin index.
type model struct {
	pos, neg map[int]uint64
	zero     uint64
}

func newModel() *model { return &model{pos: map[int]uint64{}, neg: map[int]uint64{}} }

func (m *model) add(ix Indexer, v float64, n uint64) {
	switch {
	case v > ix.MinIndexableValue():
		m.pos[ix.Index(v)] += n
	case v < -ix.MinIndexableValue():
		m.neg[ix.Index(-v)] += n
	default:
		m.zero += n
	}
}

func (m *model) count() uint64 {
	n := m.zero
	for _, c := range m.pos {
		n += c
	}
	for _, c := range m.neg {
		n += c
	}
	return n
}

// equalModel fails t unless b holds exactly m's counts.
func equalModel(t *testing.T, b *Bins, m *model) {
	t.Helper()
	if b.zero != m.zero {
		t.Fatalf("zero count %d, want %d", b.zero, m.zero)
	}
	check := func(name string, c *counts, want map[int]uint64) {
		t.Helper()
		var sum uint64
		if c != nil {
			for j, n := 0, c.n(); j < n; j++ {
				x := c.get(j)
				if x != want[c.off+j] {
					t.Fatalf("%s bin %d = %d, want %d", name, c.off+j, x, want[c.off+j])
				}
				sum += x
			}
			if sum != c.sum {
				t.Fatalf("%s sum %d, bins add up to %d", name, c.sum, sum)
			}
		}
		var wantSum uint64
		for _, x := range want {
			wantSum += x
		}
		if sum != wantSum {
			t.Fatalf("%s holds %d, want %d (bins outside the range?)", name, sum, wantSum)
		}
	}
	check("positive", &b.pos, m.pos)
	check("negative", b.neg, m.neg)
	if b.Count() != m.count() {
		t.Fatalf("Count() = %d, want %d", b.Count(), m.count())
	}
}
