package promapi

import (
	"math"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/util/jsonutil"
)

// TestJSONMatchesPrometheusCodec: timestamps, values and histograms are written byte for
// byte as Prometheus' own marshalers (util/jsonutil, which its API codec calls) write them.
func TestJSONMatchesPrometheusCodec(t *testing.T) {
	theirs := func(f func(s *jsoniter.Stream)) string {
		s := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
		defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(s)
		f(s)
		return string(s.Buffer())
	}
	for _, ts := range []int64{0, 1, 9, 10, 99, 100, 1000, 1_800_000_004_500, 1_800_000_004_007, -1500, -7} {
		if got, want := string(appendTimestamp(nil, ts)), theirs(func(s *jsoniter.Stream) { jsonutil.MarshalTimestamp(ts, s) }); got != want {
			t.Errorf("timestamp %d: %s, want %s", ts, got, want)
		}
	}
	for _, f := range []float64{0, 1, -1, 0.1, 1e-7, -1e-7, 1e21, 123456789.125, math.NaN(), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64, math.MaxFloat64, 2.5e-6} {
		if got, want := string(appendValue(nil, f)), theirs(func(s *jsoniter.Stream) { jsonutil.MarshalFloat(f, s) }); got != want {
			t.Errorf("value %g: %s, want %s", f, got, want)
		}
	}
	hs := []*histogram.FloatHistogram{
		{Schema: 5, ZeroThreshold: 1e-9, ZeroCount: 2, Count: 20, Sum: 123.5,
			PositiveSpans: []histogram.Span{{Offset: 10, Length: 3}, {Offset: 4, Length: 1}}, PositiveBuckets: []float64{1, 0, 5, 7},
			NegativeSpans: []histogram.Span{{Offset: 2, Length: 2}}, NegativeBuckets: []float64{3, 2}},
		{Schema: 0, Count: 0, Sum: 0},
	}
	for _, h := range hs {
		if got, want := string(appendHistogram(nil, h)), theirs(func(s *jsoniter.Stream) { jsonutil.MarshalHistogram(h, s) }); got != want {
			t.Errorf("histogram %v:\n%s, want\n%s", h, got, want)
		}
	}
}
