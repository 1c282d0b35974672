package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/internal/logrepeat"
	"github.com/slide-metrics/slide/window"
)

// maxPeerKey bounds a peer request's key (or glob) and metric, as the public read routes do.
const maxPeerKey = 1024

// maxPeerBy and maxPeerMatchers bound an opGroups request's by-labels and matchers (the
// query API takes at most 16 by-labels, and match= of at most 4 KiB).
const (
	maxPeerBy       = 16
	maxPeerMatchers = 256
)

// maxPeerWindow is the longest window a peer request may carry.
const maxPeerWindow = 365 * 24 * time.Hour

// maxPeerRead bounds how long a peer read runs, as the read routes' timeout (25 s) bounds
// theirs: a request without HeaderDeadline, or with one far off, stops there.
const maxPeerRead = 30 * time.Second

// MinPeerSkew is the least disagreement between a peer's read time and this instance's
// clock that a peer read tolerates, whatever the ring's skew: a request lives up to
// --peer-timeout (1 s) on its way.
const MinPeerSkew = time.Second

// PeerHandler serves PeerPath: this instance's partial aggregates of the partitions a peer
// asks for, binary encoded. It reads the local store only, never asking another peer, so
// a request cannot loop, and it changes nothing: window's reads never move a ring. It
// requires HeaderPeer, a signed request when the group has a key (Config.PeerKey or
// Token), and a read time within the metric's skew of this instance's clock (see
// servePeer).
func (c *Cluster) PeerHandler() http.Handler {
	bufs := sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := c.servePeer(w, r, &bufs)
		c.m.served.WithLabelValues(strconv.Itoa(code)).Inc()
		c.m.servedLatency.Observe(time.Since(start).Seconds())
	})
}

// statusAskerGone is the served code of a peer read whose asker went away mid-read (nginx's
// 499): nothing is written.
const statusAskerGone = 499

// saturatingSub is a − b, clamped to the int64 range (a hostile now may be anywhere).
func saturatingSub(a, b int64) int64 {
	d := a - b
	switch {
	case b < 0 && d < a:
		return math.MaxInt64
	case b > 0 && d > a:
		return math.MinInt64
	}
	return d
}

func peerError(w http.ResponseWriter, code int, msg string) int {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
	return code
}

// servePeer answers one peer request, and returns the status it wrote. In order: GET only
// (405); with a group key, the request's signature for this instance (401, before
// anything else is read); HeaderPeer (400); the deadline (504; a read stops at it, and at
// maxPeerRead, with 499); the parameters (400); and
// the read time: a peer's now must lie within the metric's ring skew (--max-skew, one slot
// by default, at least MinPeerSkew) of this instance's clock, either way (409). The read
// is at the peer's now, so that every owner of one fan-out covers the same slots; being a
// read, it moves nothing. The answer is signed with the request's nonce.
func (c *Cluster) servePeer(w http.ResponseWriter, r *http.Request, bufs *sync.Pool) int {
	if r.Method != http.MethodGet {
		return peerError(w, http.StatusMethodNotAllowed, "GET only")
	}
	var stamp Stamp
	if c.auth != nil {
		var err error
		if stamp, err = StampOf(r.Header); err == nil {
			err = c.auth.VerifyRequest(Message{Method: r.Method, To: c.cfg.Advertise, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery}, stamp)
		}
		if err != nil {
			return peerError(w, http.StatusUnauthorized, "peer request not authenticated: "+err.Error())
		}
	}
	if r.Header.Get(HeaderPeer) == "" {
		return peerError(w, http.StatusBadRequest, "not a peer request: "+HeaderPeer+" missing")
	}
	own := c.now()
	// The read stops at the asker's deadline, which nobody waits past, and at maxPeerRead
	// whatever the request says (one without a deadline, or with a far one).
	deadline := time.Now().Add(maxPeerRead)
	if dl, err := strconv.ParseInt(r.Header.Get(HeaderDeadline), 10, 64); err == nil {
		if time.Now().UnixMilli() > dl {
			return peerError(w, http.StatusGatewayTimeout, "deadline passed before the read began")
		}
		if t := time.UnixMilli(dl); t.Before(deadline) {
			deadline = t
		}
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	r = r.WithContext(ctx)
	q := r.URL.Query()
	op, metric, key := q.Get("op"), q.Get("metric"), q.Get("key")
	now, err1 := strconv.ParseInt(q.Get("now"), 10, 64)
	winMs, err2 := strconv.ParseInt(q.Get("window"), 10, 64)
	timed := op != opKeys && op != opMetrics // reads at an instant: now within the skew
	windowed := timed && op != opSlots && op != opExemplars && op != opExtents
	if timed && err1 != nil || windowed && (err2 != nil || winMs <= 0 || winMs > maxPeerWindow.Milliseconds()) {
		return peerError(w, http.StatusBadRequest, "bad now or window")
	}
	if len(key) > maxPeerKey || len(metric) > maxPeerKey {
		return peerError(w, http.StatusBadRequest, "key or metric too long")
	}
	if timed {
		skew := max(c.cfg.Store.RingConfig(metric).Skew, MinPeerSkew).Milliseconds()
		if now > own+skew || now < own-skew {
			return peerError(w, http.StatusConflict, fmt.Sprintf("read time %d is %d ms from this instance's clock %d; peers must agree within %d ms (--max-skew)", now, saturatingSub(now, own), own, skew))
		}
	}
	asked := map[int32]bool{}
	if ps := q.Get("parts"); ps != "" {
		for f := range strings.SplitSeq(ps, ",") {
			p, err := strconv.ParseInt(f, 10, 32)
			if err != nil || p < 0 {
				return peerError(w, http.StatusBadRequest, "bad partition "+clip(f))
			}
			asked[int32(p)] = true
		}
	}
	// Serve what was asked and is restored here; report exactly that.
	parts := map[int32]bool{}
	var served []int32
	gen := c.generation()
	for _, p := range c.cfg.Local() {
		if asked[p] {
			parts[p] = true
			served = append(served, p)
		}
	}
	// Series fed by no partition belong to the instance that holds them, and are counted
	// by its own reads: a peer answer carries partitions only (mergeLocal's peer, the
	// matches below p >= 0).
	win := time.Duration(winMs) * time.Millisecond
	bins := q.Get("bins") == "1"

	bp := bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 {
			bufs.Put(bp)
		}
	}()
	b := appendServed((*bp)[:0], served)
	var err error
	switch op {
	case opMerge:
		p := window.Partial{NoBins: !bins}
		if err = mergeLocal(r.Context(), c.cfg.Store, now, metric, key, parts, true, win, &p); err == nil {
			b = appendPartial(b, &p)
		}
	case opSeries:
		var n int
		var body []byte
		keyMatch := matchOf(key, parts)
		match := func(k string, p int32) bool { return p >= 0 && keyMatch(k, p) }
		err = c.cfg.Store.EachPartial(now, metric, stopping(r.Context(), match), win, bins, func(k string, _ int32, p *window.Partial) {
			n++
			body = appendString(body, k)
			body = appendPartial(body, p)
		})
		b = binary.AppendUvarint(b, uint64(n))
		b = append(b, body...)
	case opGroups:
		sel, g, perr := peerGroups(q, key, bins)
		if perr != nil {
			return peerError(w, http.StatusBadRequest, perr.Error())
		}
		err = c.cfg.Store.MergeGroupPartials(now, metric, stopping(r.Context(), func(k string, p int32) bool { return p >= 0 && parts[p] && sel.Match(k) }), win, g)
		over := errors.Is(err, window.ErrTooManyGroups)
		if over {
			err = nil // answered as such: the asker refuses the read, not the partitions
		}
		b = appendGroups(b, g, over)
	case opKeys:
		var perr error
		if b, perr = c.appendKeys(r.Context(), b, q, metric, key, parts); perr != nil {
			return peerError(w, http.StatusBadRequest, perr.Error())
		}
	case opSlots:
		var perr error
		if b, perr = c.appendSlots(r.Context(), b, q, now, metric, key, parts); perr != nil {
			return peerError(w, http.StatusBadRequest, perr.Error())
		}
	case opExtents:
		var perr error
		if b, perr = c.appendExtents(r.Context(), b, q, now, metric, key, parts); perr != nil {
			return peerError(w, http.StatusBadRequest, perr.Error())
		}
	case opExemplars:
		var perr error
		if b, perr = c.appendExemplars(r.Context(), b, q, now, metric, key, parts); perr != nil {
			return peerError(w, http.StatusBadRequest, perr.Error())
		}
	case opMetrics:
		ms := c.cfg.Store.Metrics()
		b = binary.AppendUvarint(b, uint64(len(ms)))
		for _, m := range ms {
			b = appendString(b, m)
		}
	default:
		return peerError(w, http.StatusBadRequest, "unknown op "+clip(op))
	}
	if r.Context().Err() != nil {
		return statusAskerGone // the read stopped early: nobody waits for a short answer
	}
	if err != nil {
		if errors.Is(err, window.ErrBadWindow) {
			return peerError(w, http.StatusBadRequest, err.Error())
		}
		return peerError(w, http.StatusInternalServerError, err.Error())
	}
	if c.generation() != gen {
		// A rebalance began during the read and may have dropped part of what it read:
		// serve nothing, so the asker counts these partitions missing instead of short.
		b = appendServed(b[:0], nil)
		switch op {
		case opMerge:
			b = appendPartial(b, &window.Partial{})
		case opGroups:
			b = binary.AppendUvarint(append(b, 0), 0)
			b = binary.AppendUvarint(b, 0)
		default:
			b = binary.AppendUvarint(b, 0)
		}
	}
	*bp = b
	if c.auth != nil {
		SetAnswerHeader(w.Header(), c.auth.SignAnswer(stamp.Nonce, b))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return http.StatusOK
}

// metrics are the slide_cluster_* collectors.
type metrics struct {
	requests      *prometheus.CounterVec   // peer requests sent, by op and result
	latency       *prometheus.HistogramVec // their duration, by op
	served        *prometheus.CounterVec   // peer requests answered, by code
	servedLatency prometheus.Histogram
	unavailable   *prometheus.CounterVec // reads that could not cover every partition, by caller
	keyOff        prometheus.Gauge       // series on another partition than murmur2 gives their key (keycheck.go)
	errLog        *rate.Limiter
	errRep        *logrepeat.Log // the same warning at most once a minute (Cluster.warn)
}

func newMetrics(reg prometheus.Registerer, c *Cluster) (*metrics, error) {
	buckets := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slide_cluster_peer_requests_total",
			Help: "Partial reads sent to peers, by operation and result (ok; unauthenticated: the answer did not prove itself with the group's key, or the peer refused this instance's signature; older_version: the peer, of an older version, does not know the operation and is asked the older one; error: unreachable, timed out, refused or corrupt).",
		}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "slide_cluster_peer_request_duration_seconds", Help: "Time a partial read sent to a peer took, by operation.", Buckets: buckets,
		}, []string{"op"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slide_cluster_peer_served_total", Help: "Partial reads answered for peers, by status code.",
		}, []string{"code"}),
		servedLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "slide_cluster_peer_served_duration_seconds", Help: "Time to answer a peer's partial read.", Buckets: buckets,
		}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slide_cluster_unavailable_total",
			Help: "Reads that could not cover every partition (an owner unreachable or restoring), by caller: query, or a usage rule's outcome (usage_open, usage_closed, usage_denied_anyway).",
		}, []string{"caller"}),
		keyOff: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slide_cluster_key_partition_mismatches",
			Help: "Series this instance held at the last check (every minute, at most 100,000 looked at) whose partition is not the one murmur2 gives their key. With --key-partitioner murmur2 it must be 0 on every instance: else one-key reads routed to murmur2's owner miss events.",
		}),
		errLog: rate.NewLimiter(rate.Every(time.Second), 5),
		errRep: logrepeat.New(time.Minute),
	}
	// Every known label combination is exported at 0 from the start: a counter that
	// appears at its first increment has no sample to rise from, so increase() and rate()
	// (and an alert on them) miss that first failure.
	for _, op := range peerOps {
		for _, result := range []string{"ok", "unauthenticated", "older_version", "error"} {
			m.requests.WithLabelValues(op, result)
		}
	}
	for _, caller := range unavailableCallers {
		m.unavailable.WithLabelValues(caller)
	}
	for _, op := range peerOps {
		m.latency.WithLabelValues(op)
	}
	// The codes an alert reads: 401, a peer without the group's key (or a stranger) on the
	// peer route; 409, an asker's clock beyond the skew.
	for _, code := range []string{"200", "401", "409"} {
		m.served.WithLabelValues(code)
	}
	if reg == nil {
		return m, nil
	}
	members := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "slide_cluster_members", Help: "Members of the consumer group in the last stable view.",
	}, func() float64 {
		if v := c.view.Load(); v != nil {
			return float64(v.Members)
		}
		return 0
	})
	for _, col := range []prometheus.Collector{m.requests, m.latency, m.served, m.servedLatency, m.unavailable, m.keyOff, members} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(op string, err error, d time.Duration) {
	result := "ok"
	switch {
	case errors.Is(err, errUnauthenticated):
		result = "unauthenticated"
	case errors.Is(err, errOlderVersion):
		result = "older_version" // asked again with the op it knows (askOlder): not a failure
	case err != nil:
		result = "error"
	}
	m.requests.WithLabelValues(op, result).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}

// Unavailable counts a read of caller ("query", "usage") that could not cover every
// partition.
func (c *Cluster) Unavailable(caller string) { c.m.unavailable.WithLabelValues(caller).Inc() }

// peerGroups reads an opGroups request's by and m parameters and returns their selector,
// compiled with key, and empty groups to fill.
func peerGroups(q url.Values, key string, bins bool) (*window.Selector, *window.GroupPartials, error) {
	var by []string
	if s := q.Get("by"); s != "" {
		by = strings.Split(s, ",")
	}
	if len(by) > maxPeerBy || len(q["m"]) > maxPeerMatchers {
		return nil, nil, fmt.Errorf("more than %d by-labels or %d matchers", maxPeerBy, maxPeerMatchers)
	}
	sel, err := peerSelector(q, key)
	if err != nil {
		return nil, nil, err
	}
	g, err := window.NewGroupPartials(by, bins)
	if err != nil {
		return nil, nil, err
	}
	return sel, g, nil
}

// peerSelector compiles the selector of a request's key and matchers (its m parameters).
func peerSelector(q url.Values, key string) (*window.Selector, error) {
	if len(q["m"]) > maxPeerMatchers {
		return nil, fmt.Errorf("more than %d matchers", maxPeerMatchers)
	}
	ms := make([]window.Matcher, 0, len(q["m"]))
	for _, s := range q["m"] {
		m, ok := parseMatcher(s)
		if !ok {
			return nil, fmt.Errorf("bad matcher %s", clip(s))
		}
		ms = append(ms, m)
	}
	return window.CompileSelector(key, ms)
}

// appendGroups writes an opGroups answer's body: the over flag, then each group sorted.
func appendGroups(b []byte, g *window.GroupPartials, over bool) []byte {
	if over {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(g.By())))
		return binary.AppendUvarint(b, 0)
	}
	b = append(b, 0)
	b = binary.AppendUvarint(b, uint64(len(g.By())))
	groups := g.Sorted()
	b = binary.AppendUvarint(b, uint64(len(groups)))
	for _, pg := range groups {
		for _, v := range pg.Values {
			b = appendString(b, v)
		}
		b = appendPartial(b, &pg.Partial)
	}
	return b
}

// ask sends one peer request and decodes its answer.
func (c *Cluster) ask(ctx context.Context, addr string, r *request) (*answer, error) {
	start := time.Now()
	a, err := c.askOnce(ctx, addr, r)
	if r.older != "" && errors.Is(err, errUnknownOp) {
		// askOlder asks again with the op the peer knows: counted, not warned of.
		c.m.observe(r.op, errOlderVersion, time.Since(start))
		return a, err
	}
	c.m.observe(r.op, err, time.Since(start))
	if err != nil {
		c.warn("cluster: peer read failed", "peer", addr, "op", r.op, "err", err)
	}
	return a, err
}

func (c *Cluster) askOnce(ctx context.Context, addr string, r *request) (*answer, error) {
	req, stamp, err := c.peerRequest(ctx, Message{Method: http.MethodGet, To: addr, Path: PeerPath, Query: r.rawQuery()})
	if err != nil {
		return nil, err
	}
	do := c.http.Do
	if c.rt != nil {
		do = c.rt.RoundTrip // a peer never redirects: a 3xx is an error like any status but 200
	}
	body, err := c.answerOf(addr, stamp, do, req)
	if err != nil {
		return nil, err
	}
	a, err := decodeAnswer(r.op, body)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	// A peer serves only what it was asked: anything else would count twice.
	for _, p := range a.served {
		if !slices.Contains(r.parts, p) {
			return nil, fmt.Errorf("%w: peer %s served partition %d it was not asked for", ErrCorrupt, addr, p)
		}
	}
	return &a, nil
}

// answerOf sends req, a request to peer addr signed with stamp (zero when unsigned), with
// do, and returns the answer's body once it is a 200 within MaxAnswerBytes whose signature
// proves it answers that request: the read and the limiter's batches check answers alike.
func (c *Cluster) answerOf(addr string, stamp Stamp, do func(*http.Request) (*http.Response, error), req *http.Request) ([]byte, error) {
	resp, err := do(req)
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", addr, err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, refusedErr(addr, c.auth != nil, clip(string(body)))
	}
	if resp.StatusCode == http.StatusBadRequest && bytes.HasPrefix(body, []byte("unknown op ")) {
		return nil, fmt.Errorf("peer %s answered %s: %s: %w", addr, resp.Status, clip(string(body)), errUnknownOp)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("peer %s answered %s: %s", addr, resp.Status, clip(string(body)))
	}
	if int64(len(body)) > c.cfg.MaxAnswerBytes {
		return nil, fmt.Errorf("peer %s: answer over %d bytes", addr, c.cfg.MaxAnswerBytes)
	}
	if c.auth != nil {
		mac, err := AnswerMACOf(resp.Header)
		if err == nil {
			err = c.auth.VerifyAnswer(stamp.Nonce, body, mac)
		}
		if err != nil {
			return nil, unprovenErr("the answer", addr, err)
		}
	}
	return body, nil
}

// peerRequest builds the request m describes to peer m.To, with this instance's address and
// ctx's deadline in its headers, signed for m.To alone (never with the API's token: a member
// that is not what it claims learns nothing it could use elsewhere); the stamp is zero when
// the group has no key. A read and a limiter batch build theirs alike.
func (c *Cluster) peerRequest(ctx context.Context, m Message) (*http.Request, Stamp, error) {
	target := c.scheme + m.To + m.Path
	if m.Query != "" {
		target += "?" + m.Query
	}
	var body io.Reader
	if m.Body != nil {
		body = bytes.NewReader(m.Body)
	}
	req, err := http.NewRequestWithContext(ctx, m.Method, target, body)
	if err != nil {
		return nil, Stamp{}, fmt.Errorf("building the peer request: %w", err)
	}
	req.Header.Set(HeaderPeer, c.cfg.Advertise)
	if m.Method == http.MethodPost {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set(HeaderDeadline, strconv.FormatInt(dl.UnixMilli(), 10))
	}
	var stamp Stamp
	if c.auth != nil {
		stamp = c.auth.SignRequest(m)
		stamp.SetHeader(req.Header)
	}
	return req, stamp, nil
}

// warn logs a warning of the cluster's: the same line at most once a minute, the next one
// saying how many were held back (a peer or the broker down fails every retry alike:
// logrepeat), and at most a few lines a second in all.
func (c *Cluster) warn(msg string, args ...any) {
	if ok, held := c.m.errRep.AllowIf(msg+fmt.Sprint(args...), c.m.errLog.Allow); ok {
		c.log.Warn(msg, append(args, c.m.errRep.Attrs(held)...)...)
	}
}
