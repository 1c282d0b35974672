package cluster

// Listing series a page at a time: Keys on the asking side, opKeys on the peer's.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/window"
)

// MaxKeysLimit is the largest page Keys lists: an opKeys request's limit, which a peer
// refuses past it (its answer could not announce more).
const MaxKeysLimit = maxDecodeItems

// maxPeerCursor bounds an opKeys request's after_key: a series string, its key and labels.
const maxPeerCursor = 1 << 16

// listSelector is the selector of a listing's matchers: nil (every series, without looking
// at their strings) when there are none.
func listSelector(ms []window.Matcher) (*window.Selector, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	return window.CompileSelector("", ms)
}

// Keys lists the series of metric (every metric when empty) whose key (series string)
// starts with prefix and that the label matchers ms select, held by any instance, sorted
// by metric then key, each once: the first limit of them strictly after after (from the
// first when after is nil), or all of them when limit ≤ 0. Ask for one more than a page
// to learn whether another follows; limit is at most MaxKeysLimit (the most a peer
// answers), a larger one an error. missing lists the partitions no instance served; the
// error is ctx's when it ended the read, the limit's, or the matchers'.
//
// Each owner is sent the cursor, the limit and the matchers, and answers only its own
// first limit ids (opKeys), so a page costs at most limit ids per instance on the wire and
// in memory, whatever the number of series; each instance still scans its own series
// once. An owner of an older version ignores those fields and answers every series of the
// metric with the prefix: this side cuts every answer, its own included, by the same
// cursor, matchers and limit, so the page is the same.
func (c *Cluster) Keys(ctx context.Context, metric, prefix string, ms []window.Matcher, after *window.SeriesID, limit int) (ids []window.SeriesID, missing []int32, err error) {
	if limit > MaxKeysLimit {
		// Every peer would refuse it (400), the page then missing their partitions.
		return nil, nil, fmt.Errorf("cluster: a page of %d series: at most %d", limit, MaxKeysLimit)
	}
	sel, err := listSelector(ms)
	if err != nil {
		return nil, nil, err
	}
	local, gen := c.localSet()
	page := window.NewSeriesPage(after, limit)
	match := stopping(ctx, func(k string, p int32) bool {
		return (p < 0 || local[p]) && strings.HasPrefix(k, prefix) && sel.Match(k)
	})
	c.cfg.Store.EachSeries(func(m, k string, p int32) {
		if (metric == "" || m == metric) && match(k, p) {
			page.Offer(m, k)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	r := request{op: opKeys, metric: metric, key: prefix, ms: ms, after: after, limit: max(limit, 0)}
	missing = c.fanout(ctx, r, local, func(a *answer) {
		for _, id := range a.keys {
			if (metric == "" || id.Metric == metric) && strings.HasPrefix(id.Key, prefix) && sel.Match(id.Key) {
				page.Offer(id.Metric, id.Key)
			}
		}
	})
	return page.IDs(), c.settle(gen, local, missing), nil
}

// appendKeyFields writes an opKeys request's page fields: m (the matchers), after_metric
// and after_key (the cursor, when after is set) and limit (when above 0).
func appendKeyFields(b []byte, r *request) []byte {
	for _, m := range r.ms {
		b = append(b, "&m="...)
		b = append(b, url.QueryEscape(appendMatcher(nil, m))...)
	}
	if r.after != nil {
		b = append(b, "&after_metric="...)
		b = append(b, url.QueryEscape(r.after.Metric)...)
		b = append(b, "&after_key="...)
		b = append(b, url.QueryEscape(r.after.Key)...)
	}
	if r.limit > 0 {
		b = append(b, "&limit="...)
		b = strconv.AppendInt(b, int64(r.limit), 10)
	}
	return b
}

// appendKeys writes the body of an opKeys answer: the series of metric (every metric when
// empty) fed by the partitions in parts whose key starts with prefix and that the request's
// matchers (m) select, strictly after its cursor (after_metric, after_key) when it has
// one; with limit=N only the first N of them, sorted, else every one, in no order (an
// asker of an older version sends neither cursor nor limit, and gets what it always got).
func (c *Cluster) appendKeys(ctx context.Context, b []byte, q url.Values, metric, prefix string, parts map[int32]bool) ([]byte, error) {
	var sel *window.Selector
	if len(q["m"]) > 0 {
		var err error
		if sel, err = peerSelector(q, ""); err != nil {
			return b, err
		}
	}
	var after *window.SeriesID
	if q.Has("after_metric") {
		after = &window.SeriesID{Metric: q.Get("after_metric"), Key: q.Get("after_key")}
		if len(after.Metric) > maxPeerKey || len(after.Key) > maxPeerCursor {
			return b, fmt.Errorf("cursor's metric over %d bytes or key over %d", maxPeerKey, maxPeerCursor)
		}
	}
	limit := 0
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxKeysLimit {
			return b, fmt.Errorf("bad limit %s: want 1 to %d", clip(s), MaxKeysLimit)
		}
		limit = n
	}
	page := window.NewSeriesPage(after, limit)
	keep := stopping(ctx, func(k string, p int32) bool {
		return p >= 0 && parts[p] && strings.HasPrefix(k, prefix) && sel.Match(k)
	})
	if after == nil && limit == 0 {
		// Every series: written as found, as before the page existed (no set, no sort).
		var n int
		var body []byte
		c.cfg.Store.EachSeries(func(m, k string, p int32) {
			if (metric == "" || m == metric) && keep(k, p) {
				n++
				body = appendString(body, m)
				body = appendString(body, k)
			}
		})
		b = binary.AppendUvarint(b, uint64(n))
		return append(b, body...), nil
	}
	c.cfg.Store.EachSeries(func(m, k string, p int32) {
		if (metric == "" || m == metric) && keep(k, p) {
			page.Offer(m, k)
		}
	})
	ids := page.IDs()
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = appendString(b, id.Metric)
		b = appendString(b, id.Key)
	}
	return b, nil
}
