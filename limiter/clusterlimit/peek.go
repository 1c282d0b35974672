package clusterlimit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/limiter"
)

// A peek at each level of a key (GET /v1/quota of a policy with levels): the owner answers
// each level's decision of cost 0, charging nothing. It is a POST to Path whose first byte
// is kindPeek, not version, so an owner from before peeks refuses it as a batch of an
// unknown version (400, "corrupt message: version") and the caller reports the key's
// numbers without levels. A request is
//
//	kindPeek(1) policy(string) fingerprint(8 bytes, big endian) key(string) now(varint, unix ns)
//
// and its answer kindPeek(1) status(1 byte), then for StatusOK only n(uvarint, 1 to
// limiter.MaxLevels) n × level, org first; level: the length of the level's key (a prefix
// of the asked key, longer than the level's before it; the last is the key itself) as a uvarint, allowed(1 byte, 0 or 1),
// limit remaining retry reset (uvarints; the durations in ns).
const kindPeek = 2

// peekLevel is one level of a peek's answer.
type peekLevel struct {
	n int // the length of the level's key
	d limiter.Decision
}

func appendPeekRequest(b []byte, it *item) []byte {
	b = append(b, kindPeek)
	b = appendString(b, it.policy)
	b = binary.BigEndian.AppendUint64(b, it.fp)
	b = appendString(b, it.key)
	return binary.AppendVarint(b, it.now)
}

func decodePeekRequest(b []byte) (item, error) {
	r := reader{b: b}
	var it item
	if r.byte("kind") != kindPeek {
		return it, fmt.Errorf("%w: not a peek", ErrCorrupt)
	}
	it.policy, it.fp = r.policy(nil)
	it.key = r.string("key", limiter.MaxKeyLen)
	it.now = r.varint("now")
	return it, r.end()
}

func appendPeekAnswer(b []byte, status byte, levels []peekLevel) []byte {
	b = append(b, kindPeek, status)
	if status != StatusOK {
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(levels)))
	for i := range levels {
		d := &levels[i].d
		b = binary.AppendUvarint(b, uint64(levels[i].n))
		if d.Allowed {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(max(d.Limit, 0)))
		b = binary.AppendUvarint(b, uint64(max(d.Remaining, 0)))
		b = binary.AppendUvarint(b, uint64(max(d.RetryAfter, 0)))
		b = binary.AppendUvarint(b, uint64(max(d.ResetAfter, 0)))
	}
	return b
}

// decodePeekAnswer reads a peek's answer: its status, and for StatusOK each level, the
// keys' lengths increasing (the caller checks them against its key).
func decodePeekAnswer(b []byte) (byte, []peekLevel, error) {
	r := reader{b: b}
	if r.byte("kind") != kindPeek {
		return 0, nil, fmt.Errorf("%w: not a peek's answer", ErrCorrupt)
	}
	status := r.byte("status")
	if r.err == nil && status >= statusEnd {
		r.fail("status")
	}
	var levels []peekLevel
	if r.err == nil && status == StatusOK {
		n := r.uvarint("levels")
		if n == 0 || n > limiter.MaxLevels {
			r.fail("levels")
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			var l peekLevel
			kn := r.uvarint("level")
			if kn > limiter.MaxKeyLen || len(levels) > 0 && int(kn) <= levels[len(levels)-1].n {
				r.fail("level")
			}
			l.n = int(kn)
			switch r.byte("allowed") {
			case 0:
			case 1:
				l.d.Allowed = true
			default:
				r.fail("allowed")
			}
			lim, rem := r.uvarint("limit"), r.uvarint("remaining")
			if lim > limiter.MaxQuota || rem > lim {
				r.fail("limit or remaining")
			}
			l.d.Limit, l.d.Remaining = int64(lim), int64(rem)
			l.d.RetryAfter, l.d.ResetAfter = r.duration("retry"), r.duration("reset")
			levels = append(levels, l)
		}
	}
	if r.end() != nil {
		return 0, nil, r.err
	}
	return status, levels, nil
}

var _ limiter.LevelPeeker = (*Backend)(nil)

// PeekLevels is limiter.LevelPeeker: each level's decision and key for key under p at now,
// org first, charging nothing, from the key's owner (this instance's memory when it owns
// the key's route and restored its partition, else the owner asked by one signed POST; a
// stale owner is asked again once at the new one, as a decision is). An owner from before
// peeks cannot answer: then no levels and no error (logged, rate-limited), and Quota
// reports the key's numbers alone. Errors are Decide's: ErrNoOwner, ErrOwner, a timeout,
// or the owner's transport's.
func (b *Backend) PeekLevels(ctx context.Context, p *limiter.Policy, key string, now time.Time) ([]limiter.Decision, []string, error) {
	o := b.owned[p.Name]
	if o == nil {
		return nil, nil, fmt.Errorf("clusterlimit: policy %q is not a cluster policy", p.Name)
	}
	if p.Levels.N == 0 {
		return nil, nil, fmt.Errorf("clusterlimit: policy %q has no levels", p.Name)
	}
	it := item{policy: p.Name, fp: o.fingerprintOf(p), key: key, now: now.UnixNano()}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.EffectiveTimeout()) // a decision's bound
	}
	var stale string // the owner that answered stale, if one did
	for {
		part, addr, ok := b.g.KeyOwner(o.route(key))
		switch {
		case !ok:
			return nil, nil, ErrNoOwner
		case addr == stale:
			return nil, nil, fmt.Errorf("%w: %s is a stale owner of %q and the group names no other yet", ErrOwner, addr, key)
		case addr == b.g.Self():
			return b.peekOwned(o.variant(p, it.fp), part, &it)
		}
		sent := time.Now()
		status, levels, err := b.askPeek(ctx, deadline, addr, &it)
		switch {
		case err != nil && olderOwner(err):
			b.warnf(slog.LevelWarn, "the owner cannot report a key's levels (an older slide): GET /v1/quota gives the key's numbers alone",
				"owner", addr, "policy", p.Name)
			return nil, nil, nil
		case err != nil:
			return nil, nil, fmt.Errorf("clusterlimit: owner %s: %w", addr, err)
		case status == StatusStale && stale == "":
			stale = addr
			dctx, cancel := context.WithDeadline(ctx, deadline)
			b.g.Describe(dctx, sent)
			cancel()
			continue
		case status != StatusOK:
			return nil, nil, fmt.Errorf("%w: %s for %q", ErrOwner, statusNames[status], key)
		}
		per := make([]limiter.Decision, len(levels))
		keys := make([]string, len(levels))
		for i, l := range levels {
			if l.n > len(key) || i == len(levels)-1 && l.n != len(key) {
				return nil, nil, fmt.Errorf("%w: a level of %d bytes for %q", ErrCorrupt, l.n, key)
			}
			per[i], keys[i] = l.d, key[:l.n]
			per[i].Policy = p.Name
		}
		return per, keys, nil
	}
}

// olderOwner reports whether err is an owner's refusal of a peek as a batch of an unknown
// version: a slide from before peeks.
func olderOwner(err error) bool {
	s := err.Error()
	return strings.Contains(s, "400") && strings.Contains(s, "corrupt message: version")
}

// askPeek asks owner addr for its levels by one POST.
func (b *Backend) askPeek(ctx context.Context, deadline time.Time, addr string, it *item) (byte, []peekLevel, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ans, err := b.g.PostPeer(ctx, "limit", addr, Path, appendPeekRequest(nil, it))
	if err != nil {
		return 0, nil, err
	}
	return decodePeekAnswer(ans)
}

// peekOwned peeks at its levels by mem here, this instance owning partition part.
func (b *Backend) peekOwned(mem *limiter.Memory, part int32, it *item) ([]limiter.Decision, []string, error) {
	if mem == nil {
		return nil, nil, fmt.Errorf("%w: %s (this instance) for %q", ErrOwner, statusNames[StatusPolicy], it.key)
	}
	b.own.mu.RLock()
	defer b.own.mu.RUnlock()
	if st := b.ownStatusLocked(part); st != StatusOK {
		return nil, nil, fmt.Errorf("%w: %s (this instance) for %q", ErrOwner, statusNames[st], it.key)
	}
	per, keys, err := mem.PeekLevels(it.key, time.Unix(0, it.now))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w (this instance) for %q", ErrOwner, err, it.key)
	}
	return per, keys, nil
}

// servePeek answers a forwarded peek (the body's first byte kindPeek): stale for a key whose
// partition this instance does not own, policy for one whose numbers differ.
func (b *Backend) servePeek(w http.ResponseWriter, x cluster.Exchange, body []byte) int {
	it, err := decodePeekRequest(body)
	if err != nil {
		return plain(w, http.StatusBadRequest, err.Error())
	}
	status, levels := b.peekForwarded(&it)
	x.Answer(w, appendPeekAnswer(make([]byte, 0, 8+len(levels)*24), status, levels))
	return http.StatusOK
}

// peekForwarded is the status and levels of a forwarded peek.
func (b *Backend) peekForwarded(it *item) (byte, []peekLevel) {
	o := b.owned[it.policy]
	if o == nil || o.p.Levels.N == 0 {
		return StatusPolicy, nil
	}
	mem := b.forwarded(o, it)
	if mem == nil {
		return StatusPolicy, nil
	}
	part, addr, ok := b.g.KeyOwner(o.route(it.key))
	if !ok || addr != b.g.Self() {
		return StatusStale, nil
	}
	b.own.mu.RLock()
	defer b.own.mu.RUnlock()
	if st := b.ownStatusLocked(part); st != StatusOK {
		return st, nil
	}
	per, keys, err := mem.PeekLevels(it.key, time.Unix(0, it.now))
	switch {
	case errors.Is(err, limiter.ErrStoreFull):
		return StatusFull, nil
	case err != nil:
		return StatusBad, nil
	}
	levels := make([]peekLevel, len(per))
	for i := range per {
		levels[i] = peekLevel{n: len(keys[i]), d: per[i]}
	}
	return StatusOK, levels
}
