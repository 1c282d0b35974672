package sketch

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
)

// Sketch family names, as used in Kind.Name and in Kind.String.
const (
	NameDDSketch = "ddsketch"
	NameHDR      = "hdr"
)

// Defaults applied to zero fields of a Kind.
const (
	DefaultRelativeAccuracy = 0.01      // DDSketch: 1% relative error
	DefaultSigFigs          = 2         // HDR: two significant decimal digits
	DefaultLowest           = 1         // HDR: lowest discernible value (1 unit, e.g. 1 ms)
	DefaultHighest          = 3_600_000 // HDR: highest trackable value (1 h in ms)
)

// Limits checked by Kind.Validate. They bound the memory any Kind, and so any
// decoded sketch, can ask for.
const (
	MinRelativeAccuracy = 1e-4    // finer DDSketch accuracies need millions of bins for common ranges
	MaxHDRCounts        = 1 << 21 // HDR counts array length cap (16 MiB of int64 counts)
)

// Kind names a sketch family and its precision. The zero Kind is DDSketch at
// 1% relative accuracy; zero fields take the documented defaults, and fields
// of the other family are ignored. Kind is a comparable value: two kinds
// describe the same bins when their normalized forms are equal (see Equal).
type Kind struct {
	// Name is "ddsketch" (default when empty), "hdr" or "native".
	Name string
	// RelativeAccuracy is the DDSketch relative error bound, in
	// [MinRelativeAccuracy, 1); default 0.01.
	RelativeAccuracy float64
	// SigFigs is the HDR number of significant decimal digits, 1..5; default 2.
	SigFigs int
	// Lowest and Highest are the HDR trackable range in integer units
	// (Lowest >= 1, Highest >= 2*Lowest); defaults 1 and 3,600,000.
	Lowest, Highest int64
	// Schema is the native family's Prometheus native-histogram schema, MinSchema..MaxSchema;
	// default DefaultSchema (5). Its bins are exactly the buckets of a native histogram of
	// that schema (bucket factor 2^(2^-schema), relative accuracy 1.08% at 5), so a window
	// exports as a native histogram without re-bucketing.
	Schema int
}

// normalized returns k with defaults filled in and the other family's fields
// cleared, so that equal kinds compare equal with ==.
func (k Kind) normalized() Kind {
	switch k.Name {
	case "", NameDDSketch:
		return Kind{Name: NameDDSketch, RelativeAccuracy: cmp.Or(k.RelativeAccuracy, DefaultRelativeAccuracy)}
	case NameHDR:
		return Kind{Name: NameHDR, SigFigs: cmp.Or(k.SigFigs, DefaultSigFigs),
			Lowest: cmp.Or(k.Lowest, DefaultLowest), Highest: cmp.Or(k.Highest, DefaultHighest)}
	case NameNative:
		return Kind{Name: NameNative, Schema: cmp.Or(k.Schema, DefaultSchema)}
	}
	return k
}

// Equal reports whether k and o describe the same sketch after defaults are
// applied (so Kind{} equals Kind{Name: "ddsketch", RelativeAccuracy: 0.01}).
func (k Kind) Equal(o Kind) bool { return k.normalized() == o.normalized() }

// Validate reports whether k (after defaults) names a known family with a
// usable precision. The error wraps ErrKind.
func (k Kind) Validate() error {
	n := k.normalized()
	switch n.Name {
	case NameDDSketch:
		acc := n.RelativeAccuracy
		if !(acc >= MinRelativeAccuracy && acc < 1) {
			return fmt.Errorf("%w: ddsketch relative accuracy %v outside [%v, 1)", ErrKind, acc, MinRelativeAccuracy)
		}
		return nil
	case NameHDR:
		if n.SigFigs < 1 || n.SigFigs > 5 {
			return fmt.Errorf("%w: hdr significant figures %d outside 1..5", ErrKind, n.SigFigs)
		}
		if n.Lowest < 1 {
			return fmt.Errorf("%w: hdr lowest %d < 1", ErrKind, n.Lowest)
		}
		if n.Highest/2 < n.Lowest {
			return fmt.Errorf("%w: hdr highest %d < 2*lowest %d", ErrKind, n.Highest, n.Lowest)
		}
		g := newHDRGeometry(n)
		if g.unitMag+g.halfMag > 61 {
			return fmt.Errorf("%w: hdr lowest %d too large for %d significant figures", ErrKind, n.Lowest, n.SigFigs)
		}
		if g.countsLen > MaxHDRCounts {
			return fmt.Errorf("%w: hdr range %d..%d at %d significant figures needs %d counts (max %d)",
				ErrKind, n.Lowest, n.Highest, n.SigFigs, g.countsLen, MaxHDRCounts)
		}
		return nil
	case NameNative:
		if n.Schema < MinSchema || n.Schema > MaxSchema {
			return fmt.Errorf("%w: native schema %d outside %d..%d", ErrKind, n.Schema, MinSchema, MaxSchema)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown sketch family %q (want %q, %q or %q)", ErrKind, k.Name, NameDDSketch, NameHDR, NameNative)
}

// String formats k with defaults applied: "ddsketch:0.01",
// "hdr:2:1:3600000" (sigfigs:lowest:highest) or "native:5". ParseKind reads it back.
func (k Kind) String() string {
	n := k.normalized()
	switch n.Name {
	case NameDDSketch:
		return NameDDSketch + ":" + strconv.FormatFloat(n.RelativeAccuracy, 'g', -1, 64)
	case NameHDR:
		return fmt.Sprintf("%s:%d:%d:%d", NameHDR, n.SigFigs, n.Lowest, n.Highest)
	case NameNative:
		return NameNative + ":" + strconv.Itoa(n.Schema)
	}
	return k.Name
}

// ParseKind is the inverse of Kind.String. "ddsketch" and "hdr" alone (and
// the empty string) mean the family defaults; "hdr:3" sets only the
// significant figures. The result is validated.
func ParseKind(s string) (Kind, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	var k Kind
	switch parts[0] {
	case "", NameDDSketch:
		k.Name = NameDDSketch
		if len(parts) > 2 {
			return Kind{}, fmt.Errorf("%w: parsing %q: want ddsketch[:accuracy]", ErrKind, s)
		}
		if len(parts) == 2 {
			acc, err := strconv.ParseFloat(parts[1], 64)
			if err != nil {
				return Kind{}, fmt.Errorf("%w: parsing %q: accuracy: %v", ErrKind, s, err)
			}
			if acc == 0 {
				return Kind{}, fmt.Errorf("%w: parsing %q: accuracy must be > 0", ErrKind, s)
			}
			k.RelativeAccuracy = acc
		}
	case NameHDR:
		k.Name = NameHDR
		if len(parts) > 4 {
			return Kind{}, fmt.Errorf("%w: parsing %q: want hdr[:sigfigs[:lowest[:highest]]]", ErrKind, s)
		}
		fields := []*int64{nil, nil, &k.Lowest, &k.Highest}
		for i := 1; i < len(parts); i++ {
			x, err := strconv.ParseInt(parts[i], 10, 64)
			if err != nil {
				return Kind{}, fmt.Errorf("%w: parsing %q: field %d: %v", ErrKind, s, i, err)
			}
			if x <= 0 {
				return Kind{}, fmt.Errorf("%w: parsing %q: field %d must be > 0", ErrKind, s, i)
			}
			if i == 1 {
				if x > 5 {
					return Kind{}, fmt.Errorf("%w: parsing %q: significant figures %d outside 1..5", ErrKind, s, x)
				}
				k.SigFigs = int(x)
				continue
			}
			*fields[i] = x
		}
	case NameNative:
		k.Name = NameNative
		if len(parts) > 2 {
			return Kind{}, fmt.Errorf("%w: parsing %q: want native[:schema]", ErrKind, s)
		}
		if len(parts) == 2 {
			x, err := strconv.Atoi(parts[1])
			if err != nil || x < MinSchema || x > MaxSchema {
				return Kind{}, fmt.Errorf("%w: parsing %q: schema must be an integer in %d..%d", ErrKind, s, MinSchema, MaxSchema)
			}
			k.Schema = x
		}
	default:
		return Kind{}, fmt.Errorf("%w: parsing %q: unknown sketch family %q", ErrKind, s, parts[0])
	}
	if err := k.Validate(); err != nil {
		return Kind{}, err
	}
	return k.normalized(), nil
}

// Indexer returns the bin mapping for k, to use with Bins. For native kinds it
// is the Prometheus native-histogram bucket index of the schema (shared, built
// once). For DDSketch it is
// sketches-go's CubicallyInterpolatedMapping (no math.Log on the hot path, the
// same relative-accuracy guarantee as the logarithmic mapping; verified by
// TestIndexerAccuracy), with a table-driven Index that gives the mapping's own
// index for every value (cubicIndexer), shared per accuracy. For HDR it is a log-linear indexer whose bins are
// exactly HdrHistogram's counts indices at k's precision, so Bins built with
// it convert to an HDR histogram without loss (values above Highest still get
// log-linear bins; only ToSketch refuses them). DDSketch and native
// indexers are shared, one per accuracy or schema; each HDR call builds a new
// one, so build one per configuration and share it (Indexers are immutable,
// or fill their tables atomically, and are safe for concurrent use).
func (k Kind) Indexer() (Indexer, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	n := k.normalized()
	if n.Name == NameHDR {
		return newHDRIndexer(n), nil
	}
	if n.Name == NameNative {
		return nativeIndexers[n.Schema], nil
	}
	m, err := cubicFor(n.RelativeAccuracy)
	if err != nil {
		return nil, fmt.Errorf("%w: building mapping: %v", ErrKind, err)
	}
	return m, nil
}

// Indexer maps a value to a bin index and back. sketches-go's
// mapping.IndexMapping satisfies it. Index is only called with values greater
// than MinIndexableValue; Value(Index(v)) is within RelativeAccuracy of v.
// Implementations must be immutable and safe for concurrent use.
type Indexer interface {
	Index(v float64) int
	Value(index int) float64
	MinIndexableValue() float64
	RelativeAccuracy() float64
}

var _ Indexer = (mapping.IndexMapping)(nil)

// hdrGeometry is HdrHistogram's bucket layout, computed as hdrhistogram-go
// does (hdr.go: geometryMagnitudes, getBucketsNeededToCoverValue).
type hdrGeometry struct {
	unitMag   uint  // log2 of the unit: floor(log2(Lowest))
	halfMag   uint  // log2 of half the sub-bucket count
	countsLen int   // length of HDR's counts array for Highest
	highest   int64 // highest trackable value
}

func newHDRGeometry(k Kind) hdrGeometry {
	subBucketCountMag := uint(math.Ceil(math.Log2(2 * math.Pow10(k.SigFigs))))
	halfMag := max(subBucketCountMag, 1) - 1
	unitMag := uint(bits.Len64(uint64(k.Lowest)) - 1)
	g := hdrGeometry{unitMag: unitMag, halfMag: halfMag, highest: k.Highest}
	if unitMag+halfMag > 61 {
		return g
	}
	smallestUntrackable := int64(1) << (halfMag + 1) << unitMag
	buckets := 1
	for smallestUntrackable <= k.Highest {
		if smallestUntrackable > math.MaxInt64/2 {
			buckets++
			break
		}
		smallestUntrackable <<= 1
		buckets++
	}
	g.countsLen = (buckets + 1) << halfMag
	return g
}

// hdrIndexer maps values to HdrHistogram counts indices. Values are
// truncated to integer units, as HdrHistogram records int64s.
type hdrIndexer struct {
	hdrGeometry
	subMask   uint64 // (subBucketCount-1) << unitMag
	halfCount int
	minIdx    float64 // largest float below 1<<unitMag: HDR's index 0 is our zero bin
}

// hdrMaxValue bounds what hdrIndexer.Index converts to an integer, so that
// huge floats map to a finite index instead of an undefined conversion.
const hdrMaxValue = float64(1 << 62)

func newHDRIndexer(k Kind) *hdrIndexer {
	g := newHDRGeometry(k)
	return &hdrIndexer{
		hdrGeometry: g,
		subMask:     (uint64(1)<<(g.halfMag+1) - 1) << g.unitMag,
		halfCount:   1 << g.halfMag,
		minIdx:      math.Nextafter(float64(uint64(1)<<g.unitMag), 0),
	}
}

// Index returns HdrHistogram's counts index for the integer part of v
// (hdr.go countsIndexFor). Values beyond 2^62 share the last index.
func (h *hdrIndexer) Index(v float64) int {
	if !(v < hdrMaxValue) {
		v = hdrMaxValue - 1
	}
	if v < 0 {
		v = 0
	}
	x := uint64(v)
	bucket := uint(64-bits.LeadingZeros64(x|h.subMask)) - h.unitMag - (h.halfMag + 1)
	sub := int(x >> (bucket + h.unitMag))
	return int(bucket+1)<<h.halfMag + sub - h.halfCount
}

// Value returns HdrHistogram's highest equivalent value of the bin, which is
// what its ValueAtQuantile reports for a sample in that bin.
func (h *hdrIndexer) Value(index int) float64 {
	if index < 0 {
		return 0
	}
	bucket := index>>h.halfMag - 1
	sub := index&(h.halfCount-1) + h.halfCount
	if bucket < 0 {
		sub -= h.halfCount
		bucket = 0
	}
	shift := uint(bucket) + h.unitMag
	if shift > 62 {
		return hdrMaxValue
	}
	lowest := uint64(sub) << shift
	return float64(lowest + uint64(1)<<shift - 1)
}

// MinIndexableValue is just below one HDR unit: values that truncate to
// HdrHistogram's first bin (0 .. unit-1) count as zero.
func (h *hdrIndexer) MinIndexableValue() float64 { return h.minIdx }

// RelativeAccuracy is HdrHistogram's bin width relative to the bin's lowest
// value, 1/2^halfMag (0.78% at 2 significant figures). It holds for integer
// values with Lowest = 1; fractional values also lose their fractional part.
func (h *hdrIndexer) RelativeAccuracy() float64 { return 1 / float64(h.halfCount) }
