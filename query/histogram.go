package query

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// HistogramSpec exports the window of every series of one metric as a Prometheus native
// histogram, slide_window_values{metric,key,window}, read from the store at scrape time
// (--export-histograms "latency_ms:5m"). A labelled series carries its labels too, as the
// window exports' do (export_labels.go).
//
// When the metric's ring uses a native sketch kind ("native:5", which slide serve gives
// such metrics by default) its bins are the histogram's buckets, so the export is exact:
// histogram_quantile in Prometheus sees the same buckets a client_golang native histogram
// observing the raw values would have. Any other kind is re-bucketed into schema 5: each
// bin's representative value goes into the native bucket holding it, so a quantile's error
// is the sketch's own (1% for ddsketch:0.01) plus one schema-5 bucket (2.2%), about 3.2%
// before Prometheus' interpolation inside the bucket.
type HistogramSpec struct {
	Metric string
	Window time.Duration
}

// ParseHistogramSpecs reads --export-histograms: metric:window specs separated by ';' (or
// ','), e.g. "latency_ms:5m;cost:1h". An empty string is no spec; a repeated one is read
// once. Whether the window fits the metric's ring is checked by New.
func ParseHistogramSpecs(s string) ([]HistogramSpec, error) {
	var out []HistogramSpec
	for part := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ';' || r == ',' }) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndexByte(part, ':')
		if i < 0 {
			return nil, fmt.Errorf("%w %q: missing window (want metric:window, e.g. latency_ms:5m)", ErrExportSpec, part)
		}
		metric, win := strings.TrimSpace(part[:i]), strings.TrimSpace(part[i+1:])
		if metric == "" {
			return nil, fmt.Errorf("%w %q: empty metric (want metric:window, e.g. latency_ms:5m)", ErrExportSpec, part)
		}
		d, err := window.ParseWindow(win)
		if err != nil {
			return nil, fmt.Errorf("%w %q: window %v (want metric:window, e.g. latency_ms:5m)", ErrExportSpec, part, err)
		}
		if h := (HistogramSpec{Metric: metric, Window: d}); !slices.Contains(out, h) {
			out = append(out, h) // a repeated spec would export every series twice
		}
	}
	return out, nil
}

// String formats the spec as ParseHistogramSpecs reads it.
func (h HistogramSpec) String() string { return h.Metric + ":" + window.FormatDuration(h.Window) }

func (h HistogramSpec) validate(rc window.RingConfig) error {
	return ExportSpec{Metric: h.Metric, Window: h.Window, aggs: []window.Stat{{Kind: window.StatCount}}}.validate(rc)
}

// nativeMetric is one exported window as a native histogram; Write hands out the
// histogram built at collection time. Its scalars and label pairs live in the struct, so a
// series costs one allocation besides its share of the arena's slabs; a scrape exporting
// series labels allocates the pairs beside it (extra).
type nativeMetric struct {
	desc             *prometheus.Desc
	h                dto.Histogram
	count, zero      uint64
	sum, zt          float64
	schema           int32
	lp               [3]dto.LabelPair
	labels           [3]*dto.LabelPair
	extra            []*dto.LabelPair // every label, sorted by name, when the scrape has series labels
	metric, key, win string
}

func (m *nativeMetric) Desc() *prometheus.Desc { return m.desc }

func (m *nativeMetric) Write(out *dto.Metric) error {
	if m.extra != nil {
		out.Label = m.extra
		out.Histogram = &m.h
		return nil
	}
	out.Label = m.labels[:]
	out.Histogram = &m.h
	return nil
}

// Label names of slide_window_values, in the sorted order client_golang writes them.
var (
	labelKey    = "key"
	labelMetric = "metric"
	labelWindow = "window"
)

// arena hands out the spans and deltas of one scrape's histograms from a few large slabs
// instead of several small allocations per series: a full slab is replaced, not grown, so
// what was handed out stays valid.
type arena struct {
	deltas  []int64
	spans   []dto.BucketSpan
	ptrs    []*dto.BucketSpan
	offsets []int32
	lengths []uint32
}

const slabSize = 4096

func take[T any](slab *[]T, n int) []T {
	if cap(*slab)-len(*slab) < n {
		*slab = make([]T, 0, max(n, slabSize))
	}
	i := len(*slab)
	*slab = (*slab)[:i+n]
	return (*slab)[i : i+n : i+n]
}

// bucket is one native bucket and its count, in ascending order of key.
type bucket = sketch.BinCount

// encode writes ascending buckets as native-histogram spans and deltas. Gaps of up to two
// empty buckets are filled with zero counts instead of opening a span, as client_golang
// does: a span costs more than two deltas.
func (ar *arena) encode(bs []bucket) ([]*dto.BucketSpan, []int64) {
	if len(bs) == 0 {
		return nil, nil
	}
	nSpans, nDeltas := 1, 1
	for i := 1; i < len(bs); i++ {
		if gap := bs[i].Index - bs[i-1].Index - 1; gap > maxZeroRun {
			nSpans++
			nDeltas++
		} else {
			nDeltas += gap + 1
		}
	}
	spans, ptrs := take(&ar.spans, nSpans), take(&ar.ptrs, nSpans)
	offsets, lengths := take(&ar.offsets, nSpans), take(&ar.lengths, nSpans)
	deltas := take(&ar.deltas, nDeltas)[:0]
	si := 0
	offsets[0] = int32(bs[0].Index)
	var prev int64
	for i, b := range bs {
		if i > 0 {
			gap := b.Index - bs[i-1].Index - 1
			if gap > maxZeroRun {
				si++
				offsets[si] = int32(gap)
			} else {
				for range gap {
					deltas = append(deltas, -prev)
					prev = 0
					lengths[si]++
				}
			}
		}
		deltas = append(deltas, int64(b.Count)-prev)
		prev = int64(b.Count)
		lengths[si]++
	}
	for i := range spans {
		spans[i] = dto.BucketSpan{Offset: &offsets[i], Length: &lengths[i]}
		ptrs[i] = &spans[i]
	}
	return ptrs, deltas
}

// histogramSource is what one spec's bins need to become native buckets.
type histogramSource struct {
	ix     sketch.Indexer
	schema int32
	exact  bool
	keyer  sketch.NativeKeyer
	ar     *arena
	pos    []bucket // scratch, reused for every series
	neg    []bucket
}

func newHistogramSource(rc window.RingConfig, ar *arena) *histogramSource {
	ix, _ := rc.Sketch.Indexer() // validated by the store
	src := &histogramSource{ix: ix, ar: ar}
	if s, ok := sketch.NativeSchema(ix); ok {
		src.schema, src.exact = int32(s), true
	} else {
		src.schema, src.keyer = sketch.DefaultSchema, sketch.NewNativeKeyer(sketch.DefaultSchema)
	}
	return src
}

// collect appends the buckets of one side of bins to dst: the bins themselves for a native
// kind, else each bin's representative re-bucketed (several bins may share a bucket).
func (src *histogramSource) collect(dst []bucket, bins *sketch.Bins, neg bool) []bucket {
	if src.exact {
		return bins.AppendBins(dst, neg)
	}
	bins.EachBin(neg, func(i int, c uint64) {
		k := src.keyer.Key(src.ix.Value(i))
		if n := len(dst); n > 0 && dst[n-1].Index == k {
			dst[n-1].Count += c
			return
		}
		dst = append(dst, bucket{Index: k, Count: c})
	})
	return dst
}

// histogram fills m with the native histogram of one window's bins, whose buckets each
// has collected into src.pos and src.neg.
func (src *histogramSource) histogram(m *nativeMetric, a window.Agg, bins *sketch.Bins) {
	m.count, m.sum, m.zero = a.Count, a.Sum, bins.ZeroCount()
	m.zt, m.schema = src.ix.MinIndexableValue(), src.schema
	m.h = dto.Histogram{SampleCount: &m.count, SampleSum: &m.sum, Schema: &m.schema, ZeroThreshold: &m.zt, ZeroCount: &m.zero}
	m.h.PositiveSpan, m.h.PositiveDelta = src.ar.encode(src.pos)
	m.h.NegativeSpan, m.h.NegativeDelta = src.ar.encode(src.neg)
}

// histogramExport publishes Config.ExportHistograms. A Prometheus scrape in the protobuf
// format (what a Prometheus with native histograms asks for) gets them encoded straight
// from the bins by appendProto, one family appended to the registry's output; the text
// formats go through the client_golang collector (Collect), registered in the server's own
// registry beside Config.Gatherer. Both give the same buckets and exemplars
// (histogram_exemplar.go; TestHistogramProtoEqualsCollector).
const (
	histogramName = "slide_window_values"
	histogramHelp = "The values in the window of a series as a native histogram (--export-histograms): histogram_quantile and histogram_count read the window; sum by merges keys and instances. Not cumulative: the window slides."
)

type histogramExport struct {
	s        *Server
	desc     *prometheus.Desc
	lastSize atomic.Int64 // bytes of the last protobuf family, to size the next one's buffer
}

// budget is how many histogram series a scrape at now may export: what the window exports
// leave of Config.ExportMaxSeries (they take series first, in spec and key order).
func (h *histogramExport) budget() int {
	b := h.s.cfg.ExportMaxSeries
	for _, e := range h.s.cfg.Export {
		b -= len(h.s.store.Keys(e.Metric, ""))
	}
	return max(b, 0)
}

// skipped is how many histogram series the cap leaves out of a scrape.
func (h *histogramExport) skipped(budget int) int {
	if budget >= h.s.store.Len() {
		return 0 // the cap cannot bite: no need to list (and sort) the keys
	}
	n := 0
	for _, spec := range h.s.cfg.ExportHistograms {
		n += len(h.s.store.Keys(spec.Metric, ""))
	}
	return max(n-budget, 0)
}

// each visits the exported histograms at now, up to budget series, in spec and key order:
// fn gets the source (with the series' buckets in src.pos and src.neg), the series'
// labels, sorted by name, and the exemplars of the window's slots, oldest first (none
// unless Config.ExportExemplars and the store keeps exemplars), all valid until fn returns: fn runs under the series'
// lock and must copy what it keeps.
func (h *histogramExport) each(now int64, budget int, ar *arena, fn func(src *histogramSource, labels [][2]string, a window.Agg, bins *sketch.Bins, ex []window.Exemplar)) {
	var scratch sketch.Bins
	var ex []window.Exemplar
	keys := make([][]string, len(h.s.cfg.ExportHistograms))
	for i, spec := range h.s.cfg.ExportHistograms {
		keys[i] = h.s.store.Keys(spec.Metric, "")
	}
	var labels [][2]string
	for i, spec := range h.s.cfg.ExportHistograms {
		src := newHistogramSource(h.s.store.RingConfig(spec.Metric), ar)
		win := window.FormatDuration(spec.Window)
		for _, series := range keys[i] {
			if budget == 0 {
				return
			}
			key, _ := exportKey(series)
			if !exportable(h.s.exportErrors, key) {
				continue // a protobuf string must be UTF-8: Prometheus would refuse the scrape
			}
			labels = append(labels[:0], [2]string{labelKey, key}, [2]string{labelMetric, spec.Metric}, [2]string{labelWindow, win})
			if labels = seriesLabels(labels, series); len(labels) > 3 {
				// Sorted by name, as client_golang writes them and the protobuf path copies.
				slices.SortFunc(labels, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
			}
			visit := func(a window.Agg, bins *sketch.Bins) {
				src.pos = src.collect(src.pos[:0], bins, false)
				src.neg = src.collect(src.neg[:0], bins, true)
				fn(src, labels, a, bins, ex)
			}
			var err error
			if h.s.cfg.ExportExemplars {
				err = h.s.store.VisitWindowExemplarsAt(now, spec.Metric, series, spec.Window, &scratch, &ex, visit)
			} else {
				err = h.s.store.VisitWindowAt(now, spec.Metric, series, spec.Window, &scratch, visit)
			}
			if err == nil {
				budget--
			} // else evicted since Keys; the window was checked by New
		}
	}
}

func (h *histogramExport) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect sends the histograms as client_golang metrics, for the text formats.
func (h *histogramExport) Collect(ch chan<- prometheus.Metric) {
	ar := new(arena)
	var out []*nativeMetric
	labelled := descCache[*prometheus.Desc]{make: func(names []string) *prometheus.Desc {
		return prometheus.NewDesc(histogramName, histogramHelp, names, nil)
	}}
	h.each(h.s.now(), h.budget(), ar, func(src *histogramSource, labels [][2]string, a window.Agg, bins *sketch.Bins, ex []window.Exemplar) {
		if len(labels) > 3 {
			m := &nativeMetric{desc: labelled.get(labels)} // one descriptor a set of label names
			src.histogram(m, a, bins)
			m.h.Exemplars = dtoExemplars(ex)
			lp := make([]dto.LabelPair, len(labels))
			m.extra = make([]*dto.LabelPair, len(labels))
			for i, l := range labels {
				lp[i] = dto.LabelPair{Name: &l[0], Value: &l[1]}
				m.extra[i] = &lp[i]
			}
			out = append(out, m)
			return
		}
		m := &nativeMetric{desc: h.desc, key: labels[0][1], metric: labels[1][1], win: labels[2][1]}
		src.histogram(m, a, bins)
		m.h.Exemplars = dtoExemplars(ex)
		m.lp = [3]dto.LabelPair{{Name: &labelKey, Value: &m.key}, {Name: &labelMetric, Value: &m.metric}, {Name: &labelWindow, Value: &m.win}}
		m.labels = [3]*dto.LabelPair{&m.lp[0], &m.lp[1], &m.lp[2]}
		out = append(out, m) // sent after the series' lock is released
	})
	for _, m := range out {
		ch <- m
	}
}

// Protobuf field numbers of io.prometheus.client (client_model's metrics.proto).
const (
	fFamilyName, fFamilyHelp, fFamilyType, fFamilyMetric                  = 1, 2, 3, 4
	fMetricLabel, fMetricHistogram                                        = 1, 7
	fLabelName, fLabelValue                                               = 1, 2
	fHistCount, fHistSum, fHistSchema, fHistZeroThreshold, fHistZeroCount = 1, 2, 5, 6, 7
	fHistNegSpan, fHistNegDelta, fHistPosSpan, fHistPosDelta              = 9, 10, 12, 13
	fSpanOffset, fSpanLength                                              = 1, 2
	metricTypeHistogram                                                   = 4
)

// appendProto appends slide_window_values at now as one length-delimited MetricFamily of
// the Prometheus protobuf exposition format, encoded straight from the bins: no client_golang
// objects, a few reused buffers.
func (h *histogramExport) appendProto(out []byte, now int64) []byte {
	fam := make([]byte, 0, h.lastSize.Load()+4096) // about last scrape's size: no regrowth
	var met, hist []byte
	fam = protowire.AppendTag(fam, fFamilyName, protowire.BytesType)
	fam = protowire.AppendString(fam, histogramName)
	fam = protowire.AppendTag(fam, fFamilyHelp, protowire.BytesType)
	fam = protowire.AppendString(fam, histogramHelp)
	fam = protowire.AppendTag(fam, fFamilyType, protowire.VarintType)
	fam = protowire.AppendVarint(fam, metricTypeHistogram)
	h.each(now, h.budget(), nil, func(src *histogramSource, labels [][2]string, a window.Agg, bins *sketch.Bins, ex []window.Exemplar) {
		hist = hist[:0]
		hist = protowire.AppendTag(hist, fHistCount, protowire.VarintType)
		hist = protowire.AppendVarint(hist, a.Count)
		hist = protowire.AppendTag(hist, fHistSum, protowire.Fixed64Type)
		hist = protowire.AppendFixed64(hist, math.Float64bits(a.Sum))
		hist = protowire.AppendTag(hist, fHistSchema, protowire.VarintType)
		hist = protowire.AppendVarint(hist, protowire.EncodeZigZag(int64(src.schema)))
		hist = protowire.AppendTag(hist, fHistZeroThreshold, protowire.Fixed64Type)
		hist = protowire.AppendFixed64(hist, math.Float64bits(src.ix.MinIndexableValue()))
		hist = protowire.AppendTag(hist, fHistZeroCount, protowire.VarintType)
		hist = protowire.AppendVarint(hist, bins.ZeroCount())
		hist = appendSpans(hist, src.neg, fHistNegSpan, fHistNegDelta)
		hist = appendSpans(hist, src.pos, fHistPosSpan, fHistPosDelta)
		hist = appendExemplars(hist, ex)
		met = met[:0]
		for _, l := range labels {
			met = protowire.AppendTag(met, fMetricLabel, protowire.BytesType)
			met = protowire.AppendVarint(met, uint64(1+protowire.SizeBytes(len(l[0]))+1+protowire.SizeBytes(len(l[1]))))
			met = protowire.AppendTag(met, fLabelName, protowire.BytesType)
			met = protowire.AppendString(met, l[0])
			met = protowire.AppendTag(met, fLabelValue, protowire.BytesType)
			met = protowire.AppendString(met, l[1])
		}
		met = protowire.AppendTag(met, fMetricHistogram, protowire.BytesType)
		met = protowire.AppendBytes(met, hist)
		fam = protowire.AppendTag(fam, fFamilyMetric, protowire.BytesType)
		fam = protowire.AppendBytes(fam, met)
	})
	h.lastSize.Store(int64(len(fam)))
	out = protowire.AppendVarint(out, uint64(len(fam)))
	return append(out, fam...)
}

// appendSpans writes ascending buckets as spans and deltas, with encode's span rule.
func appendSpans(b []byte, bs []bucket, spanField, deltaField protowire.Number) []byte {
	if len(bs) == 0 {
		return b
	}
	span := func(b []byte, off int32, n uint32) []byte {
		b = protowire.AppendTag(b, spanField, protowire.BytesType)
		size := 1 + protowire.SizeVarint(protowire.EncodeZigZag(int64(off))) + 1 + protowire.SizeVarint(uint64(n))
		b = protowire.AppendVarint(b, uint64(size))
		b = protowire.AppendTag(b, fSpanOffset, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(off)))
		b = protowire.AppendTag(b, fSpanLength, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(n))
	}
	// Spans first, then deltas: repeated fields may interleave on the wire, but one pass
	// each keeps it simple.
	off, length := int32(bs[0].Index), uint32(1)
	for i := 1; i < len(bs); i++ {
		gap := bs[i].Index - bs[i-1].Index - 1
		if gap > maxZeroRun {
			b = span(b, off, length)
			off, length = int32(gap), 1
			continue
		}
		length += uint32(gap) + 1
	}
	b = span(b, off, length)
	// Deltas packed: one tag and length for all (parsers take packed and unpacked repeated
	// scalars alike), one byte for most, since neighbouring buckets hold similar counts.
	// They are written after a length guess of one byte each and moved when the guess is off.
	b = protowire.AppendTag(b, deltaField, protowire.BytesType)
	at := len(b)
	b = protowire.AppendVarint(b, uint64(len(bs)))
	start := len(b)
	eachDelta(bs, func(d int64) {
		if z := protowire.EncodeZigZag(d); z < 0x80 {
			b = append(b, byte(z))
		} else {
			b = protowire.AppendVarint(b, z)
		}
	})
	n := len(b) - start
	if protowire.SizeVarint(uint64(n)) != start-at {
		var lenBuf [binary.MaxVarintLen64]byte
		l := protowire.AppendVarint(lenBuf[:0], uint64(n))
		b = append(b, l[:len(l)-(start-at)]...) // room for the longer length
		copy(b[at+len(l):], b[start:start+n])
		copy(b[at:], l)
		return b
	}
	protowire.AppendVarint(b[:at], uint64(n))
	return b
}

// eachDelta calls fn with the delta of every bucket of the spans encode and appendSpans
// write: runs of up to maxZeroRun empty buckets inside a span are zero counts.
func eachDelta(bs []bucket, fn func(int64)) {
	var prev int64
	for i, x := range bs {
		if i > 0 {
			if gap := x.Index - bs[i-1].Index - 1; gap <= maxZeroRun {
				for range gap {
					fn(-prev)
					prev = 0
				}
			}
		}
		fn(int64(x.Count) - prev)
		prev = int64(x.Count)
	}
}

// maxZeroRun is the longest run of empty buckets encode fills with zero deltas instead of
// opening a new span.
const maxZeroRun = 2
