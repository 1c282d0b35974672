package cluster

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// What a decision owned by one instance needs of the group (issue #30, limiter/clusterlimit):
// the owner of a key's partition, this generation's assignment, a describe on demand, and a
// signed POST exchange with a peer. The limiter's protocol itself lives in clusterlimit;
// this file only carries bytes, signed as the partial reads are.

// Self is this instance's advertised address, as the group's view names it.
func (c *Cluster) Self() string { return c.cfg.Advertise }

// Assigned reports whether this member's assignment of the current generation holds
// partition p. It changes at the start of every generation (OnGeneration), before the
// consumer revokes anything, so an instance stops owning a partition before its successor
// can start to.
func (c *Cluster) Assigned(p int32) bool {
	a := c.assigned.Load()
	if a == nil {
		return false
	}
	_, ok := slices.BinarySearch(*a, p)
	return ok
}

// KeyOwner is the partition murmur2(key) mod the topic's partitions (the Java client's
// default partitioner, kafka-go's Murmur2Balancer, slide produce) and its owner's
// advertised address: this instance's when its assignment holds the partition, else the
// view's. ok is false while the topic's partitions are unknown or the partition has no
// reachable owner in the view.
func (c *Cluster) KeyOwner(key string) (p int32, addr string, ok bool) {
	v := c.view.Load()
	if v == nil || v.Partitions <= 0 {
		return 0, "", false
	}
	p = murmur2Partition(key, v.Partitions)
	if c.Assigned(p) {
		return p, c.cfg.Advertise, true
	}
	addr = v.Owner[p]
	return p, addr, addr != ""
}

// PartitionOwner is the advertised address of partition p's owner in the current view, ""
// when the view names none (or before the first). At the start of a generation it is
// mostly the previous generation's owner (the view is described again after it), but a
// describe begun meanwhile may already have brought the new generation's.
func (c *Cluster) PartitionOwner(p int32) string {
	if v := c.view.Load(); v != nil {
		return v.Owner[p]
	}
	return ""
}

// MemberGone reports that the group, described after since, no longer has a member
// advertising addr: a partition's previous owner that crashed will write nothing more.
func (c *Cluster) MemberGone(addr string, since time.Time) bool {
	v := c.view.Load()
	return v != nil && v.At.After(since) && v.Addrs != nil && !v.Addrs[addr]
}

// KeyPartition is the partition murmur2 routes key to among n (the Java client's default
// partitioner, kafka-go's Murmur2Balancer), as KeyOwner computes it.
func KeyPartition(key string, n int) int32 { return murmur2Partition(key, max(n, 1)) }

// Partitions is the topic's partition count in the current view, 0 before the first.
func (c *Cluster) Partitions() int {
	if v := c.view.Load(); v != nil {
		return v.Partitions
	}
	return 0
}

// Describe reads the group now, unless a view newer than since is already there (another
// caller described meanwhile): a caller told that an owner moved re-resolves with it.
func (c *Cluster) Describe(ctx context.Context, since time.Time) {
	c.describeMu.Lock()
	defer c.describeMu.Unlock()
	if v := c.view.Load(); v != nil && v.At.After(since) {
		return
	}
	c.refresh(ctx)
}

// PostPeer sends body to path on the peer at addr as one signed request (with the group's
// key; the peer checks it with VerifyPeer) over the peers' keep-alive connections, and
// returns the answer's body once its signature verifies. A status other than 200 is an
// error naming it; op labels slide_cluster_peer_requests_total.
func (c *Cluster) PostPeer(ctx context.Context, op, addr, path string, body []byte) ([]byte, error) {
	start := time.Now()
	b, err := c.postPeer(ctx, addr, path, body)
	c.m.observe(op, err, time.Since(start))
	return b, err
}

func (c *Cluster) postPeer(ctx context.Context, addr, path string, body []byte) ([]byte, error) {
	req, stamp, err := c.peerRequest(ctx, Message{Method: http.MethodPost, To: addr, Path: path, Body: body})
	if err != nil {
		return nil, err
	}
	return c.answerOf(addr, stamp, c.http.Do, req)
}

// ObservePeer counts one exchange with a peer made outside PostPeer (a batch on a peer
// stream) in slide_cluster_peer_requests_total and its duration, as PostPeer counts its.
func (c *Cluster) ObservePeer(op string, err error, d time.Duration) { c.m.observe(op, err, d) }

// Exchange is one verified peer request on the serving side: Answer writes its answer,
// signed for the request.
type Exchange interface {
	Answer(w http.ResponseWriter, b []byte)
}

// peerExchange is the Exchange of VerifyPeer.
type peerExchange struct {
	c     *Cluster
	stamp Stamp
}

// VerifyPeer checks a peer POST whose body (read in full by the caller) is body: with a
// group key its signature for this instance (ErrBadSignature, ErrStaleTimestamp,
// ErrReplayed ...; answer 401), then HeaderPeer. Answers of the exchange are signed with
// the request's nonce.
func (c *Cluster) VerifyPeer(r *http.Request, body []byte) (Exchange, error) {
	x := &peerExchange{c: c}
	if c.auth != nil {
		var err error
		if x.stamp, err = StampOf(r.Header); err == nil {
			err = c.auth.VerifyRequest(Message{Method: r.Method, To: c.cfg.Advertise, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: body}, x.stamp)
		}
		if err != nil {
			return nil, err
		}
	}
	if r.Header.Get(HeaderPeer) == "" {
		return nil, fmt.Errorf("not a peer request: %s missing", HeaderPeer)
	}
	return x, nil
}

// Answer writes b as the exchange's 200 answer, signed for the request.
func (x *peerExchange) Answer(w http.ResponseWriter, b []byte) {
	if x.c.auth != nil {
		SetAnswerHeader(w.Header(), x.c.auth.SignAnswer(x.stamp.Nonce, b))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// Served counts a peer request answered with code, in slide_cluster_peer_served_total.
func (c *Cluster) Served(code int, d time.Duration) {
	c.m.served.WithLabelValues(strconv.Itoa(code)).Inc()
	c.m.servedLatency.Observe(d.Seconds())
}
