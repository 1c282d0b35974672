package query

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/window"
)

// Cluster reads the series other instances of the consumer group hold (the cluster package
// implements it; cmd/slide/serve.go injects it). Every method merges this instance's part
// with the owners' partial aggregates and returns the partitions it could not cover.
type Cluster interface {
	// Local reports that this instance holds every partition: the store alone answers,
	// with no extra hop. It must be cheap: every read calls it.
	Local() bool
	// Merge folds every series of metric matching key (exact or a glob) over win at now
	// into p; bins false skips the sketch bins.
	Merge(ctx context.Context, now int64, metric, key string, win time.Duration, bins bool, p *window.Partial) (missing []int32, err error)
	// MergeGroups folds every series of metric that key (exact, a glob or "", on the key
	// label) and the label matchers ms select over win at now into its group of g (one group
	// when g groups by nothing); bins false skips the sketch bins. It returns
	// window.ErrTooManyGroups past window.MaxGroups groups.
	MergeGroups(ctx context.Context, now int64, metric, key string, ms []window.Matcher, win time.Duration, bins bool, g *window.GroupPartials) (missing []int32, err error)
	// Each calls fn once per series of metric matching pattern ("" for all), merged.
	Each(ctx context.Context, now int64, metric, pattern string, win time.Duration, bins bool, fn func(key string, p *window.Partial)) (missing []int32, err error)
	// Keys lists the series of metric (all metrics when empty) whose key (series string)
	// starts with prefix and that the label matchers ms select, sorted by metric then key,
	// each once: the first limit of them strictly after after (nil: from the first), or all
	// when limit ≤ 0. /v1/series asks for a page and one more, so that a page costs the
	// other instances a page each, not every series.
	Keys(ctx context.Context, metric, prefix string, ms []window.Matcher, after *window.SeriesID, limit int) (ids []window.SeriesID, missing []int32, err error)
	// VisitSlotsKey calls fn for each series of metric that key (exact, a glob or "", on
	// the key label) and the label matchers ms select, held by any instance, with its live
	// slots at the instant at (at most wall, the clock's now) as window.Store.VisitSlots
	// hands them, a series two instances hold merged slot by slot (GET /v1/range composes
	// its history from them). fn returns false to stop.
	VisitSlotsKey(ctx context.Context, wall, at int64, metric, key string, ms []window.Matcher, fn func(series string, cur int64, slots []window.SlotView) bool) (missing []int32, err error)
	// Unavailable counts a read that could not cover every partition.
	Unavailable(caller string)
}

// cluster is the Cluster to read through, or nil when the local store answers alone.
func (s *Server) cluster() Cluster {
	if c := s.cfg.Cluster; c != nil && !c.Local() {
		return c
	}
	return nil
}

// parsePartial reads partial=allow|deny (default deny).
func parsePartial(v map[string][]string) (bool, error) {
	switch p := first(v, "partial"); p {
	case "", "deny":
		return false, nil
	case "allow":
		return true, nil
	default:
		return false, badParam("partial", "%q is not allow or deny", clip(p))
	}
}

func first(v map[string][]string, name string) string {
	if vals := v[name]; len(vals) > 0 {
		return vals[0]
	}
	return ""
}

// covered answers 503 unavailable, with "missing_partitions", when partitions are missing and the client did not
// allow a partial answer, and reports whether the handler may go on.
func (s *Server) covered(w http.ResponseWriter, c Cluster, missing []int32, allowPartial bool) bool {
	if len(missing) == 0 {
		return true
	}
	c.Unavailable("query")
	if allowPartial {
		return true
	}
	bp := bufPool.Get().(*[]byte)
	b := httperr.AppendOpen((*bp)[:0], httperr.Unavailable, "", unreachable(len(missing))+s.restoringHere(missing))
	b = append(b, ',')
	b = appendMissing(b, missing)
	b = append(b, "}}\n"...)
	httperr.Send(w, httperr.Unavailable, b)
	putBuf(bp, b)
	return false
}

// unreachable is covered's message: the owners of n partitions did not answer.
func unreachable(n int) string {
	return strconv.Itoa(n) + " partitions have no reachable, restored owner (an instance is down, hung or restoring); retry, or pass partial=allow for an answer over the others"
}

// restoringHere is covered's word on the missing partitions this instance is restoring
// itself (Config.Restoring), "" when none: the client learns the wait is a restore.
func (s *Server) restoringHere(missing []int32) string {
	if s.cfg.Restoring == nil {
		return ""
	}
	var b []byte
	for _, p := range s.cfg.Restoring() {
		if slices.Contains(missing, p) {
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(p), 10)
		}
	}
	if b == nil {
		return ""
	}
	return "; this instance is restoring partitions" + string(b) + " from Kafka (a rebalance assigned them): /v1/status shows its progress"
}

// appendMissing writes "missing_partitions":[...].
func appendMissing(b []byte, missing []int32) []byte {
	return appendPartitions(append(b, `"missing_partitions":`...), missing)
}

// appendPartialFlag writes ,"partial":true,"missing_partitions":[...] for a flagged answer.
func appendPartialFlag(b []byte, missing []int32) []byte {
	if len(missing) == 0 {
		return b
	}
	b = append(b, `,"partial":true,`...)
	return appendMissing(b, missing)
}
