package promapi

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/slide-metrics/slide/window"
)

// Cluster reads through the instances of a consumer group (cluster.Cluster implements it):
// the Queryable reads every series through it instead of its store alone.
type Cluster interface {
	// VisitSlots calls fn for each series of metric that the label matchers ms select, held
	// by any instance, with its live slots at the instant at (at most wall, the clock's now),
	// as window.Store.VisitSlots does; missing lists the partitions no instance served.
	VisitSlots(ctx context.Context, wall, at int64, metric string, ms []window.Matcher, fn func(series string, cur int64, slots []window.SlotView) bool) (missing []int32, err error)
	// VisitExtents is VisitSlots for listings: fn gets, of each series VisitSlots would
	// hand with a slot, its cur and slots[0].Index, and no slot is read or sent.
	VisitExtents(ctx context.Context, wall, at int64, metric string, ms []window.Matcher, fn func(series string, cur, first int64) bool) (missing []int32, err error)
	// VisitExemplars calls fn for each series of metric that the label matchers ms select,
	// held by any instance, with its exemplars at wall (the clock's now), oldest first, as
	// window.Store.VisitExemplars does; missing lists the partitions no instance served.
	VisitExemplars(ctx context.Context, wall int64, metric string, ms []window.Matcher, fn func(series string, ex []window.Exemplar) bool) (missing []int32, err error)
	// Metrics lists the metrics any instance holds, sorted, and the partitions no instance
	// answered for.
	Metrics(ctx context.Context) (metrics []string, missing []int32)
}

// MissingError is a read that could not cover every partition, without partial=allow:
// the API answers it 503 unavailable naming them.
type MissingError struct{ Partitions []int32 }

func (e *MissingError) Error() string {
	return fmt.Sprintf("partitions %s were not read: their owners did not answer (down, restoring, or past --peer-timeout); pass partial=allow for an answer over the others, with a warning naming them", partitions(e.Partitions))
}

// readNote gathers, over one request, the partitions its reads missed; allow is the
// request's partial=allow. It travels in the request's context, which the engine hands to
// every Select.
type readNote struct {
	allow   bool
	mu      sync.Mutex
	missing []int32
}

type noteKey struct{}

func withNote(ctx context.Context, n *readNote) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

// noteMissing records missing in ctx's note, and returns a MissingError unless the note
// allows a partial answer (a context without a note never does: never silently partial).
func noteMissing(ctx context.Context, missing []int32) error {
	if len(missing) == 0 {
		return nil
	}
	n, _ := ctx.Value(noteKey{}).(*readNote)
	if n == nil {
		return &MissingError{Partitions: missing}
	}
	n.mu.Lock()
	for _, p := range missing {
		if !slices.Contains(n.missing, p) {
			n.missing = append(n.missing, p)
		}
	}
	slices.Sort(n.missing)
	out := slices.Clone(n.missing)
	n.mu.Unlock()
	if n.allow {
		return nil
	}
	return &MissingError{Partitions: out}
}

func (n *readNote) partitions() []int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.missing)
}

// visit is window.Store.VisitSlots of the querier's instant, through the cluster when the
// Queryable has one: the partitions no instance served go to the request's note.
func (q *querier) visit(ctx context.Context, metric string, s *selection, stop func() bool, fn func(series string, cur int64, slots []window.SlotView) bool) error {
	c := q.q.cluster
	if c == nil {
		// The ring as it stands at the clock's now, whatever the read's instant: a ring
		// no event has moved since (an idle series) still holds slots its retention at now
		// has evicted, which an instant query must not count where a range query's step at
		// the same instant does not (the points stop at q.now either way).
		q.q.store.VisitSlots(q.wall, metric, s.sel, stop, fn)
		return nil
	}
	missing, err := c.VisitSlots(ctx, q.wall, q.now, metric, s.ms, fn)
	if err != nil {
		return err
	}
	return noteMissing(ctx, missing)
}

// visitFirst is visit for listings: fn gets, of each series visit would hand with a slot,
// its cur and first slot's index (window.Store.VisitFirstSlots, Cluster.VisitExtents),
// without the slots being built, sent or merged.
func (q *querier) visitFirst(ctx context.Context, metric string, s *selection, stop func() bool, fn func(series string, cur, first int64) bool) error {
	c := q.q.cluster
	if c == nil {
		q.q.store.VisitFirstSlots(q.wall, metric, s.sel, nil, stop, func(series string, cur, first int64, live bool) bool {
			return !live || fn(series, cur, first)
		})
		return nil
	}
	missing, err := c.VisitExtents(ctx, q.wall, q.now, metric, s.ms, fn)
	if err != nil {
		return err
	}
	return noteMissing(ctx, missing)
}

// metrics lists the metrics to resolve names against: the store's, or every instance's
// through the cluster (asked once per querier).
func (q *querier) metrics(ctx context.Context) ([]string, error) {
	c := q.q.cluster
	if c == nil {
		return q.q.store.Metrics(), nil
	}
	q.metricsOnce.Do(func() {
		var missing []int32
		q.metricNames, missing = c.Metrics(ctx)
		q.metricsErr = noteMissing(ctx, missing)
	})
	return q.metricNames, q.metricsErr
}
