package clusterlimit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/slide-metrics/slide/limiter"
)

// The wire format of one batch (a POST to Path and its answer): varints, versioned,
// bounded. A request is
//
//	version(1) n(uvarint ≤ MaxBatch) n × item
//	item: policy(string) fingerprint(8 bytes, big endian) key(string) now(varint, unix ns) cost(uvarint)
//	string: length(uvarint) bytes
//
// and its answer is version(1) n(uvarint, the request's n) n × result, each a status byte
// and, for StatusOK only, allowed(1 byte: 0 denied, 1 allowed, 2 denied at a level, then
// the length of that level's key, a prefix of the item's, as a uvarint) limit remaining
// retry reset delay (each a uvarint; the durations in ns). Value 2 is only ever sent for a
// policy with levels, which instances before it refused to load: no older peer meets it.

const version = 1

// MaxBatch bounds the decisions of one round trip; the caller splits longer queues.
const MaxBatch = 1024

// maxRequestBytes bounds one request body: MaxBatch items with the longest keys and names.
const maxRequestBytes = MaxBatch * (limiter.MaxKeyLen + 64 + 48)

// Status of one forwarded decision.
const (
	// StatusOK: decided; the result follows.
	StatusOK byte = iota
	// StatusStale: the asked instance does not own the key's partition (its assignment
	// moved): the caller describes the group again and retries once at the new owner.
	StatusStale
	// StatusNotReady: the owner has the partition but has not restored its state yet.
	StatusNotReady
	// StatusPolicy: the owner has no policy of that name, or one that differs (the
	// instances' policy files disagree).
	StatusPolicy
	// StatusFull: the owner's store holds only live state (limiter.ErrStoreFull).
	StatusFull
	// StatusBad: the owner refused the key or cost (a caller validates both first).
	StatusBad
	statusEnd
)

var statusNames = [...]string{StatusOK: "ok", StatusStale: "stale owner", StatusNotReady: "owner not ready",
	StatusPolicy: "policy differs at the owner", StatusFull: "owner's store full", StatusBad: "refused by the owner"}

// ErrCorrupt is a batch or answer that does not decode.
var ErrCorrupt = errors.New("clusterlimit: corrupt message")

// item is one decision to take at the owner.
type item struct {
	policy string
	fp     uint64
	key    string
	now    int64
	cost   int64
}

// result is the owner's answer to one item.
type result struct {
	status byte
	d      limiter.Decision // Allowed, Limit, Remaining, RetryAfter, ResetAfter, Delay; Level at the owner
	level  int              // decoded: the length of the denying level's key (0: none)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendRequest(b []byte, items []*call) []byte {
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(items)))
	for _, c := range items {
		b = appendString(b, c.it.policy)
		b = binary.BigEndian.AppendUint64(b, c.it.fp)
		b = appendString(b, c.it.key)
		b = binary.AppendVarint(b, c.it.now)
		b = binary.AppendUvarint(b, uint64(c.it.cost))
	}
	return b
}

// versionStream is the first byte of a batch in a stream frame (slide-stream/2), where
// each batch names its policies once:
//
//	versionStream(1) np(uvarint ≤ n) np × (policy(string) fingerprint(8 bytes))
//	base(varint, unix ns) n(uvarint ≤ MaxBatch) n × item
//	item: policy's index in the table(uvarint < np) key(string) now(varint, less base) cost(uvarint)
//
// about half the bytes of version's items (a policy's name and fingerprint, and a now of 9
// bytes, in each), and an owner looks each name up once a batch. Its answer is version's.
// A POST's batch stays version's, which every slide since the route reads.
const versionStream = 3

// policyRef is an entry of a stream batch's policy table.
type policyRef struct {
	name string
	fp   uint64
}

// appendStreamRequest appends items as a stream's batch; tbl is scratch for its policy
// table (returned for reuse).
func appendStreamRequest(b []byte, items []*call, tbl []policyRef) ([]byte, []policyRef) {
	tbl = tbl[:0]
	for _, c := range items {
		if n := len(tbl); n == 0 || tbl[n-1].name != c.it.policy || tbl[n-1].fp != c.it.fp {
			if refIndex(tbl, c.it.policy, c.it.fp) < 0 {
				tbl = append(tbl, policyRef{c.it.policy, c.it.fp})
			}
		}
	}
	b = append(b, versionStream)
	b = binary.AppendUvarint(b, uint64(len(tbl)))
	for _, r := range tbl {
		b = appendString(b, r.name)
		b = binary.BigEndian.AppendUint64(b, r.fp)
	}
	var base int64
	if len(items) > 0 {
		base = items[0].it.now
	}
	b = binary.AppendVarint(b, base)
	b = binary.AppendUvarint(b, uint64(len(items)))
	last := 0
	for _, c := range items {
		if r := tbl[last]; r.name != c.it.policy || r.fp != c.it.fp {
			last = refIndex(tbl, c.it.policy, c.it.fp)
		}
		b = binary.AppendUvarint(b, uint64(last))
		b = appendString(b, c.it.key)
		b = binary.AppendVarint(b, c.it.now-base) // callers' clocks of one batch: within its wait
		b = binary.AppendUvarint(b, uint64(c.it.cost))
	}
	return b, tbl
}

// refIndex is the index of (name, fp) in tbl, -1 when absent.
func refIndex(tbl []policyRef, name string, fp uint64) int {
	for i := range tbl {
		if tbl[i].fp == fp && tbl[i].name == name {
			return i
		}
	}
	return -1
}

// decodeStreamRequest reads a stream's batch, bounded as decodeRequest.
func decodeStreamRequest(b []byte) ([]item, error) {
	items, _, err := decodeStreamRequestInto(nil, nil, b, nil, false)
	return items, err
}

// decodeStreamRequestInto is decodeRequestInto for a stream's batch; tbl is scratch for
// its policy table (returned for reuse). intern turns each name of the table into a string
// once a batch.
func decodeStreamRequestInto(items []item, tbl []policyRef, b []byte, intern func([]byte) string, view bool) ([]item, []policyRef, error) {
	r := reader{b: b}
	if r.byte("version") != versionStream {
		return nil, tbl, fmt.Errorf("%w: version", ErrCorrupt)
	}
	np := r.uvarint("policies")
	if np > MaxBatch || np > uint64(len(r.b)) { // every entry takes 9 bytes or more
		return nil, tbl, fmt.Errorf("%w: %d policies in one batch", ErrCorrupt, np)
	}
	tbl = tbl[:0]
	for range np {
		var ref policyRef
		if ref.name, ref.fp = r.policy(intern); r.err != nil {
			break
		}
		tbl = append(tbl, ref)
	}
	base := r.varint("base")
	n := r.uvarint("count")
	if r.err != nil {
		return nil, tbl, r.err
	}
	if n > MaxBatch {
		return nil, tbl, fmt.Errorf("%w: %d decisions in one batch (most %d)", ErrCorrupt, n, MaxBatch)
	}
	if items == nil {
		items = make([]item, 0, n)
	}
	for range n {
		var it item
		if pi := r.uvarint("policy index"); pi < uint64(len(tbl)) {
			it.policy, it.fp = tbl[pi].name, tbl[pi].fp
		} else {
			r.fail("policy index")
		}
		it.key = r.key(view)
		d := r.varint("now")
		if d > 0 && base > math.MaxInt64-d || d < 0 && base < math.MinInt64-d {
			r.fail("now")
		}
		it.now = base + d
		it.cost = r.cost()
		if r.err != nil {
			break
		}
		items = append(items, it)
	}
	return items, tbl, r.end()
}

// reader decodes with a sticky error.
type reader struct {
	b   []byte
	err error
}

// policy reads a policy's name (interned by intern when not nil) and fingerprint.
func (r *reader) policy(intern func([]byte) string) (name string, fp uint64) {
	if intern != nil {
		name = intern(r.bytes("policy", 64))
	} else {
		name = r.string("policy", 64)
	}
	return name, r.fixed64("fingerprint")
}

// key reads a decision's key: a view of the batch's bytes when view is set.
func (r *reader) key(view bool) string {
	if !view {
		return r.string("key", limiter.MaxKeyLen)
	}
	if k := r.bytes("key", limiter.MaxKeyLen); len(k) > 0 {
		return unsafe.String(&k[0], len(k))
	}
	return ""
}

// cost reads a decision's cost, at most math.MaxInt64.
func (r *reader) cost() int64 {
	c := r.uvarint("cost")
	if c > math.MaxInt64 {
		r.fail("cost")
	}
	return int64(c)
}

// end is the reader's error once a message is read: bytes left over are one.
func (r *reader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *reader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte(what string) byte {
	if len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) string(what string, most int) string {
	n := r.uvarint(what)
	if n > uint64(most) || n > uint64(len(r.b)) {
		r.fail(what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// bytes is string without the copy: the bytes are r's.
func (r *reader) bytes(what string, most int) []byte {
	n := r.uvarint(what)
	if n > uint64(most) || n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) duration(what string) time.Duration {
	v := r.uvarint(what)
	if v > math.MaxInt64 {
		r.fail(what)
		return 0
	}
	return time.Duration(v)
}

// decodeRequest reads a batch; every item's policy name and key are bounded, its cost
// non-negative.
func decodeRequest(b []byte) ([]item, error) { return decodeRequestInto(nil, b, nil, false) }

// decodeRequestInto is decodeRequest appending to items; intern, when not nil, turns a
// policy name into its string (an owner's own, so a name costs no allocation). With view,
// the items' keys are views of b, not copies: valid only while b is, for a caller that
// decides them before reusing b (limiter.Memory copies a key it stores).
func decodeRequestInto(items []item, b []byte, intern func([]byte) string, view bool) ([]item, error) {
	r := reader{b: b}
	if r.byte("version") != version {
		return nil, fmt.Errorf("%w: version", ErrCorrupt)
	}
	n := r.uvarint("count")
	if n > MaxBatch {
		return nil, fmt.Errorf("%w: %d decisions in one batch (most %d)", ErrCorrupt, n, MaxBatch)
	}
	if items == nil {
		items = make([]item, 0, n)
	}
	for range n {
		var it item
		if it.policy, it.fp = r.policy(intern); r.err != nil {
			break
		}
		it.key = r.key(view)
		it.now = r.varint("now")
		it.cost = r.cost()
		if r.err != nil {
			break
		}
		items = append(items, it)
	}
	return items, r.end()
}

func appendAnswer(b []byte, res []result) []byte {
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(res)))
	for i := range res {
		b = append(b, res[i].status)
		if res[i].status != StatusOK {
			continue
		}
		d := &res[i].d
		switch {
		case d.Allowed:
			b = append(b, 1)
		case d.Level != "":
			b = append(b, 2)
			b = binary.AppendUvarint(b, uint64(len(d.Level)))
		default:
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(max(d.Limit, 0)))
		b = binary.AppendUvarint(b, uint64(max(d.Remaining, 0)))
		b = binary.AppendUvarint(b, uint64(max(d.RetryAfter, 0)))
		b = binary.AppendUvarint(b, uint64(max(d.ResetAfter, 0)))
		b = binary.AppendUvarint(b, uint64(max(d.Delay, 0)))
	}
	return b
}

// decodeAnswer reads the answer to a batch of n decisions; a result's level is the length
// of its denying level's key (result.level), for the caller to cut from the item's key.
func decodeAnswer(b []byte, n int) ([]result, error) {
	res := make([]result, n)
	if err := decodeAnswerTo(b, n, func(i int) *result { return &res[i] }); err != nil {
		return nil, err
	}
	return res, nil
}

func decodeAnswerTo(b []byte, n int, at func(int) *result) error {
	r := reader{b: b}
	if r.byte("version") != version {
		return fmt.Errorf("%w: version", ErrCorrupt)
	}
	if got := r.uvarint("count"); r.err == nil && got != uint64(n) {
		return fmt.Errorf("%w: %d results for %d decisions", ErrCorrupt, got, n)
	}
	for i := range n {
		res := at(i)
		*res = result{}
		s := r.byte("status")
		if s >= statusEnd {
			r.fail("status")
		}
		res.status = s
		if s == StatusOK {
			d := &res.d
			switch r.byte("allowed") {
			case 0:
			case 1:
				d.Allowed = true
			case 2:
				n := r.uvarint("level")
				if n == 0 || n > limiter.MaxKeyLen {
					r.fail("level")
				}
				res.level = int(n)
			default:
				r.fail("allowed")
			}
			lim, rem := r.uvarint("limit"), r.uvarint("remaining")
			if lim > limiter.MaxQuota || rem > lim {
				r.fail("limit or remaining")
			}
			d.Limit, d.Remaining = int64(lim), int64(rem)
			d.RetryAfter, d.ResetAfter, d.Delay = r.duration("retry"), r.duration("reset"), r.duration("delay")
		}
		if r.err != nil {
			return r.err
		}
	}
	return r.end()
}

// The checkpoint record: version(1) gen(varint) final(1 byte) at(varint, unix ms)
// n(uvarint) n × entry; entry: policy(string) fingerprint(8) key(string) expires(varint,
// unix ns) state(string, limiter.Memory.Export's form). A partition whose entries pass
// maxPartBytes is written in parts (checkpoint_parts.go): its record is then
// versionHead(1) gen final at n id(8) parts(uvarint) n × entry, and each part before it
// versionPart(1) id(8) index(uvarint) n(uvarint) n × entry.

type checkpointRecord struct {
	gen     int32
	final   bool
	at      int64
	entries []checkpointEntry
	// id and parts: a record of a checkpoint in parts names the parts written before it.
	id    uint64
	parts int
}

type checkpointEntry struct {
	policy  string
	fp      uint64
	key     string
	expires int64
	state   []byte
}

func appendEntry(b []byte, policy string, fp uint64, key string, expires int64, state []byte) []byte {
	b = appendString(b, policy)
	b = binary.BigEndian.AppendUint64(b, fp)
	b = appendString(b, key)
	b = binary.AppendVarint(b, expires)
	b = binary.AppendUvarint(b, uint64(len(state)))
	return append(b, state...)
}

// entrySize bounds the bytes appendEntry writes for an entry.
func entrySize(policy, key string, state []byte) int {
	return len(policy) + len(key) + len(state) + 8 + 4*binary.MaxVarintLen64
}

func appendCheckpoint(b []byte, gen int32, final bool, at int64, n int, entries []byte) []byte {
	b = appendCheckpointHeader(b, gen, final, at, n)
	return append(b, entries...)
}

// maxHeaderBytes bounds a checkpoint record's header: version, gen, final, at, count.
const maxHeaderBytes = 1 + binary.MaxVarintLen32 + 1 + 2*binary.MaxVarintLen64

// appendCheckpointHeader appends the header of a record of n entries.
func appendCheckpointHeader(b []byte, gen int32, final bool, at int64, n int) []byte {
	b = append(b, version)
	b = binary.AppendVarint(b, int64(gen))
	f := byte(0)
	if final {
		f = 1
	}
	b = append(b, f)
	b = binary.AppendVarint(b, at)
	return binary.AppendUvarint(b, uint64(n))
}

// maxStateBytes bounds one key's state in a checkpoint: a sliding log of MaxLogLimit
// entries.
const maxStateBytes = 2 + 20*limiter.MaxLogLimit

// decodeCheckpoint reads a checkpoint record (anyone who can write to the topic can
// write one: bounded, never a panic).
func decodeCheckpoint(b []byte) (*checkpointRecord, error) {
	r := reader{b: b}
	v := r.byte("version")
	if v != version && v != versionHead {
		return nil, fmt.Errorf("%w: checkpoint version", ErrCorrupt)
	}
	gen := r.varint("generation")
	if gen < math.MinInt32 || gen > math.MaxInt32 {
		r.fail("generation")
	}
	cp := &checkpointRecord{gen: int32(gen)}
	switch r.byte("final") {
	case 0:
	case 1:
		cp.final = true
	default:
		r.fail("final")
	}
	cp.at = r.varint("at")
	n := r.uvarint("count")
	if v == versionHead {
		cp.id = r.fixed64("id")
		parts := r.uvarint("parts")
		if parts == 0 || parts > maxParts {
			r.fail("parts")
		}
		cp.parts = int(parts)
	}
	cp.entries = r.entries(n)
	if r.end() != nil {
		return nil, r.err
	}
	return cp, nil
}

// entries reads n checkpoint entries.
func (r *reader) entries(n uint64) []checkpointEntry {
	if n > uint64(len(r.b)) { // every entry takes more than a byte
		r.fail("count")
	}
	var es []checkpointEntry
	for i := uint64(0); i < n && r.err == nil; i++ {
		var e checkpointEntry
		e.policy, e.fp = r.policy(nil)
		e.key = r.string("key", limiter.MaxKeyLen)
		e.expires = r.varint("expires")
		e.state = []byte(r.string("state", maxStateBytes))
		if r.err == nil {
			es = append(es, e)
		}
	}
	return es
}

// fixed64 reads 8 bytes, big-endian (after a failure r.b is empty: it fails too).
func (r *reader) fixed64(what string) uint64 {
	if len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}
