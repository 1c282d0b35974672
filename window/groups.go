package window

// Grouped reads (issue #27): by=label,label answers one aggregate per group of the series a
// Selector matches, a group being the series that share the values of the by-labels.
//
//   - A series without a by-label is in the group whose value for it is "" (the value the
//     selectors read for an absent label), so a series with code="500" and one without code
//     fall in two groups of by=code, and each group is exactly the series of the selector
//     with by-label="value" added (label="" selecting the series without it). "key" groups
//     by key. An empty by is one group of every selected series: ReadMerged's answer.
//   - Each group is merged exactly as ReadMerged merges a glob: count, sum, min and max
//     folded, quantiles read from the group's merged bins and clamped to [Min, Max];
//     Agg.Series is the number of series in the group. ReadRangeGroups' points are
//     ReadRangeMerged's, group by group.
//   - Groups are sorted by their values, compared label by label in the order of by.
//   - At most MaxGroups groups (fewer for a range read over rings of many slots: each group
//     holds one aggregate per slot): a by= on a label of a million values is refused with
//     ErrTooManyGroups once the scan meets one group too many, so it cannot take the memory.
//
// GroupPartials is the cluster's form: the groups before their quantiles are read, one
// Partial each, which merge across instances exactly as Partials do.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// MaxGroups is the most groups a grouped read answers.
const MaxGroups = 10_000

// maxRangeCells bounds a grouped range read's groups × slots: each group keeps one slot
// aggregate (48 bytes, and its bins) per slot of the retention, and one point per step.
const maxRangeCells = 1 << 18

// ErrTooManyGroups is returned by grouped reads whose series fall in more groups than they
// may answer (MaxGroups).
var ErrTooManyGroups = errors.New("window: too many groups")

// Group is one group of a grouped read: its by-labels, in the order given (Value "" for
// the series without the label), and the merged aggregate of its series.
type Group struct {
	Labels []Label
	Agg    Agg
}

// RangeGroup is one group of a grouped range read: its by-labels as in Group, and its
// points, oldest first.
type RangeGroup struct {
	Labels []Label
	Points []Agg
}

// CheckBy reports whether by can group series: each name "key" or a valid label name
// (ValidLabelName), none twice. The errors wrap ErrLabelName and ErrLabelTwice.
func CheckBy(by []string) error {
	for i, name := range by {
		if name != KeyLabel && !ValidLabelName(name) {
			return fmt.Errorf("%w: by %q", ErrLabelName, clipName(name))
		}
		if slices.Contains(by[:i], name) {
			return fmt.Errorf("%w: by %q", ErrLabelTwice, name)
		}
	}
	return nil
}

// appendGroupKey appends to dst the values of the by-labels of series string series, each
// length-prefixed (a uvarint): the key of its group, which a map looks up without
// allocating.
func appendGroupKey(dst []byte, by []string, series string) []byte {
	key, rest := series, ""
	if i := strings.IndexByte(series, LabelSep); i >= 0 {
		key, rest = series[:i], series[i:]
	}
	for _, name := range by {
		v := key
		if name != KeyLabel {
			v = labelValueIn(rest, name)
		}
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// appendValuesKey is appendGroupKey of values given.
func appendValuesKey(dst []byte, values []string) []byte {
	for _, v := range values {
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// groupValues splits a group key into its n values, which share its bytes.
func groupValues(key string, n int) []string {
	vs := make([]string, n)
	for i := range vs {
		l, w := binary.Uvarint([]byte(key)) // once per new group
		vs[i], key = key[w:w+int(l)], key[w+int(l):]
	}
	return vs
}

// labelsOf pairs by with values.
func labelsOf(by, values []string) []Label {
	ls := make([]Label, len(by))
	for i := range by {
		ls[i] = Label{by[i], values[i]}
	}
	return ls
}

// GroupPartials is a grouped read before its quantiles are read: one Partial per group, by
// the values of the by-labels. Grouped partials of disjoint sets of series merge exactly
// (Merge, Add), so a peer answers with its GroupPartials and the asking instance merges
// them into its own. It holds at most MaxGroups groups. It is not safe for concurrent use.
type GroupPartials struct {
	by     []string
	bins   bool
	index  map[string]int // group key (appendGroupKey) → position in groups
	groups []*PartialGroup
	buf    []byte
}

// PartialGroup is one group of a GroupPartials: the values of its by-labels, in the order
// of by, and the partial of its series.
type PartialGroup struct {
	Values  []string
	Partial Partial
	key     string // its key in GroupPartials.index, whose bytes Values share
}

// NewGroupPartials returns empty grouped partials by the labels by (CheckBy's error
// otherwise). With bins false, the partials carry no bins (Partial.NoBins): for a read
// that needs no quantile.
func NewGroupPartials(by []string, bins bool) (*GroupPartials, error) {
	if err := CheckBy(by); err != nil {
		return nil, err
	}
	return &GroupPartials{by: slices.Clone(by), bins: bins, index: map[string]int{}}, nil
}

// By is the labels g groups by.
func (g *GroupPartials) By() []string { return g.by }

// Len is the number of groups.
func (g *GroupPartials) Len() int { return len(g.groups) }

// group returns the partial of the group whose key is key, made if new, or nil when it
// would be one more than MaxGroups.
func (g *GroupPartials) group(key []byte) *Partial {
	if i, ok := g.index[string(key)]; ok {
		return &g.groups[i].Partial
	}
	if len(g.groups) >= MaxGroups {
		return nil
	}
	k := string(key)
	pg := &PartialGroup{Values: groupValues(k, len(g.by)), Partial: Partial{NoBins: !g.bins}, key: k}
	g.index[k] = len(g.groups)
	g.groups = append(g.groups, pg)
	return &pg.Partial
}

func (g *GroupPartials) tooMany() error {
	return fmt.Errorf("%w: more than %d by %s", ErrTooManyGroups, MaxGroups, strings.Join(g.by, ","))
}

// Add merges p into the group of values (one per by-label, in By's order): a peer's group,
// decoded. It returns ErrTooManyGroups when the group is new and g holds MaxGroups.
func (g *GroupPartials) Add(values []string, p *Partial) error {
	if len(values) != len(g.by) {
		return fmt.Errorf("window: %d group values by %d labels", len(values), len(g.by))
	}
	g.buf = appendValuesKey(g.buf[:0], values)
	q := g.group(g.buf)
	if q == nil {
		return g.tooMany()
	}
	q.Merge(p)
	return nil
}

// Merge merges every group of o into g; both must group by the same labels.
func (g *GroupPartials) Merge(o *GroupPartials) error {
	if !slices.Equal(g.by, o.by) {
		return fmt.Errorf("window: merging groups by %s into groups by %s", strings.Join(o.by, ","), strings.Join(g.by, ","))
	}
	for _, pg := range o.groups {
		if err := g.Add(pg.Values, &pg.Partial); err != nil {
			return err
		}
	}
	return nil
}

// Sorted returns the groups sorted by their values: what a peer encodes, and the order of
// Groups. They are g's own: merging more into g changes them.
func (g *GroupPartials) Sorted() []*PartialGroup {
	slices.SortFunc(g.groups, func(a, b *PartialGroup) int { return slices.Compare(a.Values, b.Values) })
	for i, pg := range g.groups {
		g.index[pg.key] = i
	}
	return g.groups
}

// Groups reads each group's quantiles qs with ix (the Indexer of the metric's ring
// sketch, Store.Indexer) and returns the answer a local ReadGroups gives, sorted.
func (g *GroupPartials) Groups(ix sketch.Indexer, qs []float64) []Group {
	out := make([]Group, 0, len(g.groups))
	for _, pg := range g.Sorted() {
		out = append(out, Group{Labels: labelsOf(g.by, pg.Values), Agg: pg.Partial.Agg(ix, qs)})
	}
	return out
}

// MergeGroupPartials folds every series of metric accepted by match into its group of into,
// over the last window at now: MergePartial, group by group. It returns ErrBadWindow, or
// ErrTooManyGroups once the series fall in more than MaxGroups groups (the rest of the scan
// then compares metrics only). Series are visited one shard at a time, as in ReadMerged.
func (s *Store) MergeGroupPartials(now int64, metric string, match SeriesMatch, window time.Duration, into *GroupPartials) error {
	k, err := readSlots(s.RingConfig(metric), window)
	if err != nil {
		return err
	}
	over := false
	s.scanMetric(metric, func(key string, p int32) bool { return !over && match(key, p) }, func(se *series) {
		over = !into.fold(se, now, k)
	})
	if over {
		return into.tooMany()
	}
	return nil
}

// fold folds se's window of k slots at now into its group, and reports false when that
// would be a group too many; the caller holds se's shard lock.
func (g *GroupPartials) fold(se *series, now, k int64) bool {
	g.buf = appendGroupKey(g.buf[:0], g.by, se.key)
	p := g.group(g.buf)
	if p == nil {
		return false
	}
	se.foldInto(now, k, p)
	return true
}

// eachSelected calls fn with every series of metric sel matches, under its shard's lock,
// until fn returns false: the one series of sel's key, by one lookup, when the metric has
// no labelled series (ReadSelected's choice), else a scan (scanMetric) that asks stop, when
// set, once per series it compares and matches nothing more once stop reports true.
func (s *Store) eachSelected(metric string, sel *Selector, stop func() bool, fn func(se *series) bool) {
	if key, ok := sel.ExactKey(); ok && s.LabelledSeries(metric) == 0 {
		if sel.Match(key) {
			_ = s.withSeries(metric, key, func(se *series) error { fn(se); return nil })
		}
		return
	}
	done := false
	s.scanMetric(metric, func(k string, _ int32) bool { return !done && (stop == nil || !stop()) && sel.Match(k) }, func(se *series) {
		done = !fn(se)
	})
}

// ReadGroups reads the series of metric that sel matches over the last window at now, one
// answer per group of the labels by (see the file comment), sorted by the groups' values.
// stop is as ReadKey takes it. It returns ErrNotFound when no series matched, ErrBadWindow,
// ErrBadQuantile, CheckBy's errors, and ErrTooManyGroups past MaxGroups groups.
func (s *Store) ReadGroups(now int64, metric string, sel *Selector, by []string, window time.Duration, qs []float64, stop func() bool) ([]Group, error) {
	if err := checkQuantiles(qs); err != nil {
		return nil, err
	}
	g, err := NewGroupPartials(by, true)
	if err != nil {
		return nil, err
	}
	k, err := readSlots(s.RingConfig(metric), window)
	if err != nil {
		return nil, err
	}
	over := false
	s.eachSelected(metric, sel, stop, func(se *series) bool {
		over = !g.fold(se, now, k)
		return !over
	})
	switch {
	case over:
		return nil, g.tooMany()
	case g.Len() == 0:
		return nil, ErrNotFound
	}
	return g.Groups(s.Indexer(metric), qs), nil
}

// ReadRangeGroups is ReadRangeMerged group by group: the history of each group of the
// series of metric that sel matches, as ReadGroups groups them. Each group holds one
// aggregate per slot of the retention while the scan runs, so the groups are bounded by
// MaxGroups and by 262,144 slots in all (8,738 groups of the default 30-slot ring, 72 of a
// 3,600-slot one): ErrTooManyGroups past them. maxGroups, when positive and below those
// bounds, is the caller's own: the scan stops at the first series of a group past it, with
// ErrGroupLimit. Its other errors are ReadRangeMerged's and CheckBy's.
func (s *Store) ReadRangeGroups(now int64, metric string, sel *Selector, by []string, w, step time.Duration, qs []float64, maxGroups int, stop func() bool) ([]RangeGroup, error) {
	if err := checkQuantiles(qs); err != nil {
		return nil, err
	}
	if err := CheckBy(by); err != nil {
		return nil, err
	}
	rc := s.RingConfig(metric)
	width := rc.Slot.Milliseconds()
	cur := floorDiv(now, width)
	var shp rangeShape
	var cells []rangeCell // a tiered ring's (range_tiers.go); nil without tiers
	nagg := rc.Slots
	if len(rc.Tiers) > 0 {
		if err := tieredShape(rc, w, step); err != nil {
			return nil, err
		}
		cells = tieredCells(rc, cur)
		nagg = len(cells)
	} else {
		var err error
		if shp, err = shapeFor(rc, w, step); err != nil {
			return nil, err
		}
	}
	bins := len(qs) > 0 && !rc.NoSketch
	g := newRangeGroups(by, nagg)
	g.limitTo(maxGroups)
	s.eachSelected(metric, sel, stop, func(se *series) bool {
		rg := g.of(se.key)
		if rg == nil {
			return false
		}
		if cells != nil {
			se.ring.mergeCells(cells, rg.aggs, bins)
		} else {
			se.ring.mergeSlots(now, cur, rg.aggs)
		}
		rg.series++
		return true
	})
	ix, _ := rc.Sketch.Indexer() // validated by NewStore
	return g.compose(func(aggs []slotAgg, series int) []Agg {
		if cells != nil {
			return composeCells(cells, aggs, cur, width, w.Milliseconds(), step.Milliseconds(), ix, qs, series)
		}
		return compose(make([]Agg, 0, shp.p), aggs, cur, shp, ix, qs, series)
	})
}

// rangeGroup is one group of a grouped range read while the series fold into it: its
// by-values, one aggregate per slot (or cell), and how many series it holds.
type rangeGroup struct {
	values []string
	aggs   []slotAgg
	series int
}

// rangeGroups sorts the series of a grouped range read into their groups as ReadGroups
// groups them, each holding n aggregates, at most limit groups (MaxGroups, and
// maxRangeCells in all). An empty by is one group of every series: the ungrouped read.
type rangeGroups struct {
	by       []string
	n, limit int
	over     bool // a series fell in one group too many
	capped   bool // limit is the caller's (limitTo), not the read's own bound
	index    map[string]int
	groups   []*rangeGroup
	buf      []byte
}

func newRangeGroups(by []string, n int) *rangeGroups {
	return &rangeGroups{by: by, n: n, limit: max(1, min(MaxGroups, maxRangeCells/n)), index: map[string]int{}}
}

// of returns the group of series string series, made if new, or nil (and over set) when it
// would be one group past the limit.
func (g *rangeGroups) of(series string) *rangeGroup {
	g.buf = appendGroupKey(g.buf[:0], g.by, series)
	if i, ok := g.index[string(g.buf)]; ok {
		return g.groups[i]
	}
	if len(g.groups) >= g.limit {
		g.over = true
		return nil
	}
	k := string(g.buf)
	g.index[k] = len(g.groups)
	rg := &rangeGroup{values: groupValues(k, len(g.by)), aggs: make([]slotAgg, g.n)}
	g.groups = append(g.groups, rg)
	return rg
}

func joinBy(by []string) string { return strings.Join(by, ",") }

// compose returns the groups sorted by their values, each with the points points composes
// from its aggregates; ErrTooManyGroups past the limit, ErrNotFound without a group. Each
// group's aggregates are let go once composed, before the next group composes.
func (g *rangeGroups) compose(points func(aggs []slotAgg, series int) []Agg) ([]RangeGroup, error) {
	switch {
	case g.over:
		return nil, g.tooMany()
	case len(g.groups) == 0:
		return nil, ErrNotFound
	}
	slices.SortFunc(g.groups, func(a, b *rangeGroup) int { return slices.Compare(a.values, b.values) })
	out := make([]RangeGroup, len(g.groups))
	for i, rg := range g.groups {
		out[i] = RangeGroup{Labels: labelsOf(g.by, rg.values), Points: points(rg.aggs, rg.series)}
		g.groups[i] = nil
	}
	return out, nil
}
