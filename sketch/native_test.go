package sketch

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// nativeBuckets decodes a client_golang native histogram's spans and deltas into counts by
// bucket index.
func nativeBuckets(spans []*dto.BucketSpan, deltas []int64) map[int]uint64 {
	out := map[int]uint64{}
	idx, di := 0, 0
	var cnt int64
	for i, sp := range spans {
		if i == 0 {
			idx = int(sp.GetOffset())
		} else {
			idx += int(sp.GetOffset())
		}
		for range sp.GetLength() {
			cnt += deltas[di]
			di++
			if cnt != 0 {
				out[idx] = uint64(cnt)
			}
			idx++
		}
	}
	return out
}

// TestNativeBinsAreClientGolangBuckets: the bins of a native kind hold, bucket by bucket,
// exactly what a client_golang native histogram of the same schema holds for the same
// observations: positive, negative, zero and edge values.
func TestNativeBinsAreClientGolangBuckets(t *testing.T) {
	for _, schema := range []int{1, 3, 5, 8} {
		ix, err := Kind{Name: NameNative, Schema: schema}.Indexer()
		if err != nil {
			t.Fatal(err)
		}
		h := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "h", Help: "h",
			// Just above the schema's factor: client_golang picks the largest schema whose factor does not exceed it.
			NativeHistogramBucketFactor:    math.Exp2(math.Exp2(-float64(schema))) * (1 + 1e-9),
			NativeHistogramMaxBucketNumber: 0, // never reduce resolution
		})
		var b Bins
		r := newRand(uint64(schema))
		vals := []float64{0, 1, 2, 0.5, 1e-300, -1e-300, 1e300, -3, -0.75, 1024, math.Exp2(1.0 / 32), 3e-39}
		for _, d := range dists {
			for range 2000 {
				vals = append(vals, d.gen(r))
			}
		}
		for _, v := range vals {
			h.Observe(v)
			b.Add(ix, v, 1)
		}
		var m dto.Metric
		if err := h.Write(&m); err != nil {
			t.Fatal(err)
		}
		hist := m.GetHistogram()
		if int(hist.GetSchema()) != schema {
			t.Fatalf("client_golang picked schema %d for %d", hist.GetSchema(), schema)
		}
		if hist.GetZeroThreshold() != NativeZeroThreshold || hist.GetZeroCount() != b.ZeroCount() {
			t.Errorf("schema %d: zero bucket %v/%d, ours %v/%d", schema, hist.GetZeroThreshold(), hist.GetZeroCount(), NativeZeroThreshold, b.ZeroCount())
		}
		for _, neg := range []bool{false, true} {
			want := nativeBuckets(hist.GetPositiveSpan(), hist.GetPositiveDelta())
			if neg {
				want = nativeBuckets(hist.GetNegativeSpan(), hist.GetNegativeDelta())
			}
			got := map[int]uint64{}
			b.EachBin(neg, func(i int, c uint64) { got[i] = c })
			if len(got) != len(want) {
				t.Errorf("schema %d negative %v: %d buckets, client_golang %d", schema, neg, len(got), len(want))
			}
			for i, c := range want {
				if got[i] != c {
					t.Errorf("schema %d negative %v bucket %d: %d, client_golang %d", schema, neg, i, got[i], c)
				}
			}
		}
	}
}

// TestNativeIndexerAccuracy: every value is within the schema's relative accuracy of its
// bucket's representative, and bucket i is (base^(i-1), base^i].
func TestNativeIndexerAccuracy(t *testing.T) {
	ix, _ := Kind{Name: NameNative}.Indexer()
	acc := ix.RelativeAccuracy()
	if math.Abs(acc-0.01083) > 1e-5 {
		t.Errorf("schema 5 accuracy %v, want ≈ 1.083%%", acc)
	}
	n := ix.(*nativeIndexer)
	r := newRand(7)
	for range 100_000 {
		v := math.Exp(r.Float64()*1400 - 700)
		i := ix.Index(v)
		if got := ix.Value(i); math.Abs(got-v) > acc*v*(1+1e-12) {
			t.Fatalf("v=%v: bucket %d value %v, error %v > %v", v, i, got, math.Abs(got-v)/v, acc)
		}
		if up, lo := n.upper(i), n.upper(i-1); !(v <= up && v > lo) {
			t.Fatalf("v=%v in bucket %d = (%v, %v]", v, i, lo, up)
		}
	}
	if i := ix.Index(1); i != 0 {
		t.Errorf("Index(1) = %d, want 0 (bucket (1/base, 1])", i)
	}
}

func TestNativeKindParseAndRoundTrip(t *testing.T) {
	k, err := ParseKind("native")
	if err != nil || k.String() != "native:5" {
		t.Fatalf("native: %v %v", k, err)
	}
	if k, err := ParseKind("native:8"); err != nil || k.Schema != 8 {
		t.Fatalf("native:8: %v %v", k, err)
	}
	for _, bad := range []string{"native:0", "native:9", "native:x", "native:5:1"} {
		if _, err := ParseKind(bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
	ix, _ := k.Indexer()
	var b Bins
	r := newRand(3)
	for range 5000 {
		b.Add(ix, dists[0].gen(r), 1)
	}
	b.Add(ix, 0, 3)
	b.Add(ix, -12.5, 2)
	enc, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var d Bins
	if err := d.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if d.Count() != b.Count() {
		t.Fatalf("decoded count %d, want %d", d.Count(), b.Count())
	}
	for _, q := range []float64{0, 0.001, 0.5, 0.95, 0.99, 1} {
		if got, want := d.Quantile(ix, q), b.Quantile(ix, q); got != want {
			t.Errorf("q%v: decoded %v, bins %v", q, got, want)
		}
	}
}
