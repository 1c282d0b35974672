package query

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"bytes"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// TestHistogramProtoEqualsCollector: the protobuf family appendProto writes straight from
// the bins decodes to exactly the metrics the client_golang collector builds for the text
// formats, over a native ring (sparse and dense buckets, negatives, zeros, an empty window)
// and a re-bucketed ddsketch ring, with the exemplars of the window's slots (some without
// a span id, some of a slot outside the 1m window), and the cap cuts both at the same series.
func TestHistogramProtoEqualsCollector(t *testing.T) {
	const t0 = int64(1764489600000)
	st, err := window.NewStore(window.StoreConfig{
		Metrics:   map[string]window.RingConfig{"latency_ms": {Sketch: sketch.Kind{Name: sketch.NameNative}}},
		Exemplars: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(15, 5))
	now := t0 + 100_000
	for k := range 6 {
		for i := range 20 * k * k {
			v := math.Exp(math.Log(40) + 1.5*rng.NormFloat64())
			if i%17 == 0 {
				v = -v
			}
			if i%23 == 0 {
				v = 0
			}
			ev := window.Event{TS: t0 + int64(i%90)*1000, Key: "k" + string(rune('a'+k)), Value: v}
			if i%3 == 0 {
				ev.TraceID = [16]byte{byte(k), byte(i), byte(i >> 8), 15: 1}
			}
			if i%6 == 0 {
				ev.SpanID = [8]byte{7: byte(i)}
			}
			for _, m := range []string{"latency_ms", "other"} {
				ev.Metric = m
				if err := st.ObserveAt(now, ev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// An empty window: a series whose only event left the 1m window long ago.
	if err := st.ObserveAt(now, window.Event{TS: t0, Metric: "other", Key: "old", Value: 5}); err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{1000, 9} {
		specs, _ := ParseHistogramSpecs("latency_ms:5m;other:1m")
		reg := prometheus.NewRegistry()
		s, err := New(Config{Store: st, Now: func() time.Time { return time.UnixMilli(now) }, ExportHistograms: specs, ExportExemplars: true, ExportMaxSeries: max, Registerer: reg, Gatherer: reg})
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.histReg.Gather()
		if err != nil || len(want) != 1 {
			t.Fatalf("collector: %v %v", want, err)
		}
		b := s.hist.appendProto(nil, now)
		var got dto.MetricFamily
		dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
		if err := dec.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if got.GetName() != want[0].GetName() || got.GetHelp() != want[0].GetHelp() || got.GetType() != want[0].GetType() {
			t.Fatalf("family %s %q %v, collector %s %q %v", got.GetName(), got.GetHelp(), got.GetType(), want[0].GetName(), want[0].GetHelp(), want[0].GetType())
		}
		if len(got.Metric) != len(want[0].Metric) || (max == 9 && len(got.Metric) != 9) {
			t.Fatalf("cap %d: %d metrics, collector %d", max, len(got.Metric), len(want[0].Metric))
		}
		// The registry sorts metrics by label values; the protobuf path writes them in spec
		// and key order. Prometheus does not care.
		byLabels := func(ms []*dto.Metric) map[string]*dto.Metric {
			out := map[string]*dto.Metric{}
			for _, m := range ms {
				k := ""
				for _, l := range m.GetLabel() {
					k += l.GetName() + "=" + l.GetValue() + ","
				}
				out[k] = m
			}
			return out
		}
		g, w := byLabels(got.Metric), byLabels(want[0].Metric)
		exemplars := 0
		for k, m := range w {
			if !proto.Equal(g[k], m) {
				t.Errorf("cap %d, series %s: the protobuf path and the collector differ", max, k)
			}
			exemplars += len(g[k].GetHistogram().GetExemplars())
		}
		if max == 1000 && exemplars < 20 {
			t.Errorf("%d exemplars in the scrape: the fixture means to compare many", exemplars)
		}
	}
}

// TestAppendSpansEqualsEncode: the packed protobuf spans and deltas decode to what the
// client_golang path builds, for bucket lists whose delta bytes cross the one-byte length
// guess (zero runs, large counts) and for the trivial ones.
func TestAppendSpansEqualsEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 6))
	for _, n := range []int{0, 1, 2, 50, 100, 127, 128, 300, 5000} {
		for _, gapMax := range []int{1, 3, 9} {
			var bs []bucket
			k := -20
			for range n {
				bs = append(bs, bucket{Index: k, Count: uint64(1 + rng.IntN(1000))})
				k += 1 + rng.IntN(gapMax)
			}
			var h dto.Histogram
			if err := proto.Unmarshal(appendSpans(nil, bs, fHistPosSpan, fHistPosDelta), &h); err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
			spans, deltas := new(arena).encode(bs)
			want := dto.Histogram{PositiveSpan: spans, PositiveDelta: deltas}
			if !proto.Equal(&h, &want) {
				t.Errorf("n=%d gaps<%d: protobuf spans and deltas differ from encode's", n, gapMax)
			}
		}
	}
}
