package sketch

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/pb/sketchpb"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/protobuf/proto"
)

// Sketch is the small interface over the two quantile-sketch libraries:
// DDSketch wraps *ddsketch.DDSketch (sketches-go) and HDR wraps
// *hdrhistogram.Histogram (hdrhistogram-go). Use it to ship whole sketches
// between instances; the window ring itself keeps Bins.
//
// Implementations are not safe for concurrent use.
type Sketch interface {
	// Add records count occurrences of v. It returns an error wrapping
	// ErrValue for NaN, ±Inf or a value the sketch cannot hold.
	Add(v float64, count uint64) error
	// Merge adds o's values to the receiver. It returns an error wrapping
	// ErrKindMismatch unless o has the same Kind.
	Merge(o Sketch) error
	// Quantile returns the value at q in [0, 1]; errors wrap ErrEmpty or
	// ErrQuantile.
	Quantile(q float64) (float64, error)
	// Count returns the number of values recorded.
	Count() uint64
	// Reset empties the sketch, keeping its Kind.
	Reset()
	// Kind returns the sketch family and precision.
	Kind() Kind
	// MarshalBinary encodes the sketch as one kind byte followed by the
	// library's encoding (DDSketch protobuf; HDR V2 compressed). Decode reads it.
	MarshalBinary() ([]byte, error)
}

// Kind bytes that prefix MarshalBinary output.
const (
	kindByteDDSketch byte = 1
	kindByteHDR      byte = 2
)

var (
	_ Sketch = (*DDSketch)(nil)
	_ Sketch = (*HDR)(nil)
)

// New returns an empty sketch of kind k: a DDSketch with a cubically
// interpolated mapping and dense stores (the mapping Kind.Indexer returns, so
// Bins export to it without loss), or an HDR histogram.
func (k Kind) New() (Sketch, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	n := k.normalized()
	if n.Name == NameHDR {
		return &HDR{h: hdrhistogram.New(n.Lowest, n.Highest, n.SigFigs), kind: n}, nil
	}
	if n.Name == NameNative {
		// sketches-go's logarithmic mapping with gamma = the bucket factor and index offset 1
		// has the native buckets' indices: its index i holds [gamma^(i-1), gamma^i).
		m, err := mapping.NewLogarithmicMappingWithGamma(nativeIndexers[n.Schema].base, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: building mapping: %v", ErrKind, err)
		}
		return &DDSketch{s: ddsketch.NewDDSketch(m, store.NewDenseStore(), store.NewDenseStore()), kind: n}, nil
	}
	m, err := mapping.NewCubicallyInterpolatedMapping(n.RelativeAccuracy)
	if err != nil {
		return nil, fmt.Errorf("%w: building mapping: %v", ErrKind, err)
	}
	return &DDSketch{s: ddsketch.NewDDSketch(m, store.NewDenseStore(), store.NewDenseStore()), kind: n}, nil
}

func errValue(v float64) error {
	return fmt.Errorf("%w: %v", ErrValue, v)
}

func checkQuantile(q float64) error {
	if !(q >= 0 && q <= 1) {
		return fmt.Errorf("%w: %v", ErrQuantile, q)
	}
	return nil
}

// DDSketch is a Sketch over sketches-go's DDSketch with a cubically
// interpolated mapping: relative error RelativeAccuracy on every quantile,
// any finite value (negative values and zero included). Build it with
// Kind.New. Not safe for concurrent use.
type DDSketch struct {
	s    *ddsketch.DDSketch
	kind Kind
}

// Add records count occurrences of v.
func (d *DDSketch) Add(v float64, count uint64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errValue(v)
	}
	if count == 0 {
		return nil
	}
	if err := d.s.AddWithCount(v, float64(count)); err != nil {
		return fmt.Errorf("%w: %v: %v", ErrValue, v, err)
	}
	return nil
}

// Merge adds o, which must be a *DDSketch of the same Kind.
func (d *DDSketch) Merge(o Sketch) error {
	od, ok := o.(*DDSketch)
	if !ok || od.kind != d.kind {
		return fmt.Errorf("%w: merging %v into %v", ErrKindMismatch, kindOf(o), d.kind)
	}
	if err := d.s.MergeWith(od.s); err != nil {
		return fmt.Errorf("%w: %v", ErrKindMismatch, err)
	}
	return nil
}

// Quantile returns the value at q with DDSketch rank semantics.
func (d *DDSketch) Quantile(q float64) (float64, error) {
	if err := checkQuantile(q); err != nil {
		return math.NaN(), err
	}
	if d.s.IsEmpty() {
		return math.NaN(), ErrEmpty
	}
	v, err := d.s.GetValueAtQuantile(q)
	if err != nil {
		return math.NaN(), fmt.Errorf("%w: %v", ErrEmpty, err)
	}
	return v, nil
}

// Count returns the number of values recorded.
func (d *DDSketch) Count() uint64 { return uint64(math.Round(d.s.GetCount())) }

// Reset empties the sketch, keeping its allocated stores.
func (d *DDSketch) Reset() { d.s.Clear() }

// Kind returns the sketch's kind.
func (d *DDSketch) Kind() Kind { return d.kind }

// Library returns the wrapped sketches-go sketch, for callers that need its
// full API. Mutating it mutates d.
func (d *DDSketch) Library() *ddsketch.DDSketch { return d.s }

// MarshalBinary returns kind byte 1 followed by the sketch's protobuf
// encoding (sketches-go's ToProto), readable by any DDSketch implementation.
func (d *DDSketch) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(kindByteDDSketch)
	d.s.EncodeProto(&buf)
	return buf.Bytes(), nil
}

// HDR is a Sketch over hdrhistogram-go's Histogram: integer values in
// [0, Highest], equivalent within SigFigs significant digits. Values are
// truncated to integers as the library records int64s; Quantile uses
// HdrHistogram's own percentile semantics and reports the highest equivalent
// value. Build it with Kind.New. Not safe for concurrent use.
type HDR struct {
	h    *hdrhistogram.Histogram
	kind Kind
}

// Add records count occurrences of v (truncated to an integer).
func (h *HDR) Add(v float64, count uint64) error {
	if !(v >= 0 && v <= float64(h.kind.Highest)) {
		return errValue(v)
	}
	if count > math.MaxInt64 {
		return fmt.Errorf("%w: count %d", ErrValue, count)
	}
	if count == 0 {
		return nil
	}
	if err := h.h.RecordValues(int64(v), int64(count)); err != nil {
		return fmt.Errorf("%w: %v: %v", ErrValue, v, err)
	}
	return nil
}

// Merge adds o, which must be an *HDR of the same Kind.
func (h *HDR) Merge(o Sketch) error {
	oh, ok := o.(*HDR)
	if !ok || oh.kind != h.kind {
		return fmt.Errorf("%w: merging %v into %v", ErrKindMismatch, kindOf(o), h.kind)
	}
	if dropped := h.h.Merge(oh.h); dropped != 0 {
		return fmt.Errorf("%w: merge dropped %d values", ErrValue, dropped)
	}
	return nil
}

// Quantile returns HdrHistogram's ValueAtQuantile(100*q).
func (h *HDR) Quantile(q float64) (float64, error) {
	if err := checkQuantile(q); err != nil {
		return math.NaN(), err
	}
	if h.h.TotalCount() == 0 {
		return math.NaN(), ErrEmpty
	}
	return float64(h.h.ValueAtQuantile(100 * q)), nil
}

// Count returns the number of values recorded.
func (h *HDR) Count() uint64 { return uint64(h.h.TotalCount()) }

// Reset empties the histogram, keeping its counts array.
func (h *HDR) Reset() { h.h.Reset() }

// Kind returns the histogram's kind.
func (h *HDR) Kind() Kind { return h.kind }

// Library returns the wrapped histogram. Mutating it mutates h.
func (h *HDR) Library() *hdrhistogram.Histogram { return h.h }

// MarshalBinary returns kind byte 2 followed by the HdrHistogram V2
// compressed encoding (the binary form; the library's base64 text envelope
// is removed).
func (h *HDR) MarshalBinary() ([]byte, error) {
	text, err := h.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("encoding hdr histogram: %w", err)
	}
	out := make([]byte, 1+base64.StdEncoding.DecodedLen(len(text)))
	out[0] = kindByteHDR
	n, err := base64.StdEncoding.Decode(out[1:], text)
	if err != nil {
		return nil, fmt.Errorf("encoding hdr histogram: %w", err)
	}
	return out[:1+n], nil
}

func kindOf(s Sketch) string {
	if s == nil {
		return "<nil>"
	}
	switch s := s.(type) {
	case *DDSketch:
		if s == nil {
			return "<nil>"
		}
	case *HDR:
		if s == nil {
			return "<nil>"
		}
	}
	return s.Kind().String()
}

// Decode reads a sketch written by MarshalBinary. It never panics; errors
// wrap ErrCorrupt with detail. The decoded Kind must pass Kind.Validate, which
// bounds the memory a hostile input can make it allocate.
func Decode(b []byte) (Sketch, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrCorrupt)
	}
	switch b[0] {
	case kindByteDDSketch:
		return decodeDDSketch(b[1:])
	case kindByteHDR:
		return decodeHDR(b[1:])
	}
	return nil, fmt.Errorf("%w: unknown kind byte %d", ErrCorrupt, b[0])
}

func decodeDDSketch(b []byte) (Sketch, error) {
	var pb sketchpb.DDSketch
	if err := proto.Unmarshal(b, &pb); err != nil {
		return nil, fmt.Errorf("%w: decoding ddsketch protobuf: %v", ErrCorrupt, err)
	}
	m := pb.GetMapping()
	if m != nil && m.GetInterpolation() == sketchpb.IndexMapping_NONE && m.GetIndexOffset() == 1 {
		return decodeNative(&pb)
	}
	if m == nil || m.GetInterpolation() != sketchpb.IndexMapping_CUBIC || m.GetIndexOffset() != 0 {
		return nil, fmt.Errorf("%w: ddsketch mapping %v: want cubic interpolation, offset 0", ErrCorrupt, m)
	}
	gamma := m.GetGamma()
	if !(gamma > 1 && gamma < 1e6) {
		return nil, fmt.Errorf("%w: ddsketch gamma %v", ErrCorrupt, gamma)
	}
	im, err := mapping.NewCubicallyInterpolatedMappingWithGamma(gamma, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: ddsketch mapping: %v", ErrCorrupt, err)
	}
	// Round the accuracy recomputed from gamma so that "ddsketch:0.01"
	// survives the trip through floating point.
	acc, _ := strconv.ParseFloat(strconv.FormatFloat(im.RelativeAccuracy(), 'g', 12, 64), 64)
	k := Kind{Name: NameDDSketch, RelativeAccuracy: acc}
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	// Only gammas a Kind produces are accepted, so that equal kinds always
	// have mappings sketches-go agrees to merge.
	canon, err := mapping.NewCubicallyInterpolatedMapping(acc)
	if err != nil || !canon.Equals(im) {
		return nil, fmt.Errorf("%w: ddsketch gamma %v is not the gamma of %v", ErrCorrupt, gamma, k)
	}
	return decodeStores(&pb, canon, k)
}

// decodeNative reads a native kind's sketch: sketches-go's logarithmic mapping with index
// offset 1 and the gamma of a native schema (Kind.New).
func decodeNative(pb *sketchpb.DDSketch) (Sketch, error) {
	gamma := pb.GetMapping().GetGamma()
	for s := MinSchema; s <= MaxSchema; s++ {
		if gamma != nativeIndexers[s].base {
			continue
		}
		im, err := mapping.NewLogarithmicMappingWithGamma(gamma, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: native mapping: %v", ErrCorrupt, err)
		}
		return decodeStores(pb, im, Kind{Name: NameNative, Schema: s})
	}
	return nil, fmt.Errorf("%w: logarithmic mapping gamma %v is not the bucket factor of a native schema %d..%d", ErrCorrupt, gamma, MinSchema, MaxSchema)
}

// decodeStores checks and builds the stores of a decoded DDSketch over the mapping im.
func decodeStores(pb *sketchpb.DDSketch, im mapping.IndexMapping, k Kind) (Sketch, error) {
	// The library would allocate a dense array spanning whatever indices the
	// input names, so bound them by what the mapping can produce first.
	maxIndex := im.Index(im.MaxIndexableValue()) + 1
	minIndex := im.Index(im.MinIndexableValue()) - 1
	var total float64
	for _, st := range []*sketchpb.Store{pb.GetPositiveValues(), pb.GetNegativeValues()} {
		lo, hi := math.MaxInt, math.MinInt
		for idx, c := range st.GetBinCounts() {
			if !(c >= 0 && c <= maxCount) {
				return nil, fmt.Errorf("%w: ddsketch bin %d count %v", ErrCorrupt, idx, c)
			}
			lo, hi = min(lo, int(idx)), max(hi, int(idx))
			total += c
		}
		if cs := st.GetContiguousBinCounts(); len(cs) > 0 {
			off := int(st.GetContiguousBinIndexOffset())
			lo, hi = min(lo, off), max(hi, off+len(cs)-1)
			for _, c := range cs {
				if !(c >= 0 && c <= maxCount) {
					return nil, fmt.Errorf("%w: ddsketch contiguous count %v", ErrCorrupt, c)
				}
				total += c
			}
		}
		if lo <= hi && (lo < minIndex || hi > maxIndex || hi-lo >= maxDecodeSpan) {
			return nil, fmt.Errorf("%w: ddsketch bin indices %d..%d outside %d..%d or wider than %d",
				ErrCorrupt, lo, hi, minIndex, maxIndex, maxDecodeSpan)
		}
	}
	if z := pb.GetZeroCount(); !(z >= 0 && z <= maxCount) {
		return nil, fmt.Errorf("%w: ddsketch zero count %v", ErrCorrupt, z)
	}
	if total+pb.GetZeroCount() > maxCount {
		return nil, fmt.Errorf("%w: ddsketch total count %v", ErrCorrupt, total+pb.GetZeroCount())
	}
	pos, neg := store.NewDenseStore(), store.NewDenseStore()
	if pb.PositiveValues != nil {
		store.MergeWithProto(pos, pb.PositiveValues)
	}
	if pb.NegativeValues != nil {
		store.MergeWithProto(neg, pb.NegativeValues)
	}
	s := ddsketch.NewDDSketch(im, pos, neg)
	if z := pb.GetZeroCount(); z > 0 {
		if err := s.AddWithCount(0, z); err != nil {
			return nil, fmt.Errorf("%w: ddsketch zero count: %v", ErrCorrupt, err)
		}
	}
	return &DDSketch{s: s, kind: k}, nil
}

// maxDecodeSpan bounds the index span of a decoded DDSketch store (8 MiB of
// float64 counts). At 1% accuracy the whole float64 range spans about 72k
// bins; at 0.01% one microsecond to one hour spans about 110k.
const maxDecodeSpan = 1 << 20

// maxCount bounds decoded counts to what float64 represents exactly, so that
// Count is exact and sums do not lose increments.
const maxCount = 1 << 53

// hdrHeaderSize is the V2 header inside the zlib stream: cookie, payload
// length, normalizing offset, significant digits (int32 each), lowest and
// highest (int64 each), conversion ratio (float64).
const hdrHeaderSize = 40

func decodeHDR(b []byte) (Sketch, error) {
	// Outer envelope: cookie, compressed length, zlib stream.
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: hdr: %d bytes, need at least 8", ErrCorrupt, len(b))
	}
	n := int64(int32(binary.BigEndian.Uint32(b[4:8])))
	if n < 0 || n > int64(len(b)-8) {
		return nil, fmt.Errorf("%w: hdr: compressed length %d, have %d bytes", ErrCorrupt, n, len(b)-8)
	}
	// Check the geometry before the library sizes its counts array from it.
	z, err := zlib.NewReader(bytes.NewReader(b[8 : 8+n]))
	if err != nil {
		return nil, fmt.Errorf("%w: hdr: %v", ErrCorrupt, err)
	}
	var hdr [hdrHeaderSize]byte
	_, err = io.ReadFull(z, hdr[:])
	z.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: hdr header: %v", ErrCorrupt, err)
	}
	k := Kind{
		Name:    NameHDR,
		SigFigs: int(int32(binary.BigEndian.Uint32(hdr[12:16]))),
		Lowest:  int64(binary.BigEndian.Uint64(hdr[16:24])),
		Highest: int64(binary.BigEndian.Uint64(hdr[24:32])),
	}
	if k.SigFigs == 0 || k.Lowest == 0 || k.Highest == 0 {
		return nil, fmt.Errorf("%w: hdr geometry %d:%d:%d has a zero field", ErrCorrupt, k.SigFigs, k.Lowest, k.Highest)
	}
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	h, err := hdrhistogram.Decode([]byte(base64.StdEncoding.EncodeToString(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: hdr: %v", ErrCorrupt, err)
	}
	if h.SignificantFigures() != int64(k.SigFigs) || h.LowestTrackableValue() != k.Lowest || h.HighestTrackableValue() != k.Highest {
		return nil, fmt.Errorf("%w: hdr geometry changed while decoding", ErrCorrupt)
	}
	return &HDR{h: h, kind: k}, nil
}

// ToSketch exports b as a library sketch of kind k, for shipping between
// instances. b must have been filled with k.Indexer(): bins are copied by
// index, without loss. HDR cannot hold negative values or values above
// Highest; those make ToSketch return an error wrapping ErrValue.
func (b *Bins) ToSketch(k Kind) (Sketch, error) {
	s, err := k.New()
	if err != nil {
		return nil, err
	}
	switch s := s.(type) {
	case *DDSketch:
		put := func(st store.Store, c *counts) {
			for j, n := 0, c.n(); j < n; j++ {
				if x := c.get(j); x > 0 {
					st.AddWithCount(c.off+j, float64(x))
				}
			}
		}
		put(s.s.GetPositiveValueStore(), &b.pos)
		if b.neg != nil {
			put(s.s.GetNegativeValueStore(), b.neg)
		}
		if b.zero > 0 {
			if err := s.s.AddWithCount(0, float64(b.zero)); err != nil {
				return nil, fmt.Errorf("%w: zero count: %v", ErrValue, err)
			}
		}
		return s, nil
	case *HDR:
		if b.neg != nil && b.neg.sum > 0 {
			return nil, fmt.Errorf("%w: hdr cannot hold %d negative values", ErrValue, b.neg.sum)
		}
		if b.Count() > math.MaxInt64 {
			return nil, fmt.Errorf("%w: count %d exceeds int64", ErrValue, b.Count())
		}
		snap := s.h.Export()
		g := newHDRGeometry(s.kind)
		snap.Counts[0] = int64(b.zero)
		c := &b.pos
		for j, n := 0, c.n(); j < n; j++ {
			x := c.get(j)
			if x == 0 {
				continue
			}
			i := c.off + j
			if i <= 0 || i >= g.countsLen {
				return nil, fmt.Errorf("%w: bin %d outside hdr range %v", ErrValue, i, s.kind)
			}
			snap.Counts[i] += int64(x)
		}
		s.h = hdrhistogram.Import(snap)
		return s, nil
	}
	return nil, errors.New("sketch: unreachable kind")
}
