package rls

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/window"
)

func wrapUint32(v uint32) *wrapperspb.UInt32Value { return wrapperspb.UInt32(v) }

// Limits returns how many descriptors carry a rate_limit (a quota,
// requests_per_unit 0 or unlimited) or usage rules: a file of blocks and
// exemptions alone has limits to serve though it maps to no policy.
func (c *Config) Limits() int { return len(c.limits) }

// match finds the limit of one request descriptor, as envoyproxy/ratelimit
// does: each entry descends one level, trying key+value exactly, then the
// wildcard values in file order, then the key alone; the limit is the one of
// the level the last entry reaches (a deeper or shallower match applies none).
// It returns the limit and the nodes on the path, for the key.
func (c *Config) match(domain string, d *rlv3.RateLimitDescriptor, path []*node) (*limit, []*node) {
	n := c.domains[domain]
	if n == nil {
		return nil, path
	}
	entries := d.GetEntries()
	for i, e := range entries {
		next := n.exact[entryKey{e.GetKey(), e.GetValue()}]
		if next == nil {
			for _, w := range n.wildcards {
				if w.key == e.GetKey() && window.MatchKey(w.value, e.GetValue()) {
					next = w
					break
				}
			}
		}
		if next == nil {
			next = n.byKey[e.GetKey()]
		}
		if next == nil {
			return nil, path
		}
		path = append(path, next)
		if i == len(entries)-1 {
			return next.limit, path
		}
		if next.leaf() {
			return nil, path
		}
		n = next
	}
	return nil, path
}

// limiterKey is the limiter key of a matched descriptor: the values of its
// entries, each escaped ('\' → "\\", '|' → "\|") and joined with '|'; a value
// matched by a share_threshold wildcard is replaced by its pattern, so all
// such values share one counter. When that is not a valid limiter key (empty,
// over limiter.MaxKeyLen bytes, or holding a control character) the key is
// "\h" + the first 32 hex digits of the SHA-256 of the length-prefixed values:
// escaping never produces "\h", so the two forms cannot collide.
func limiterKey(d *rlv3.RateLimitDescriptor, path []*node, buf *[]byte) string {
	if e := d.GetEntries(); len(e) == 1 && (len(path) == 0 || !path[0].share) {
		// One entry needing no escape is its own key: no copy.
		if v := e[0].GetValue(); len(v) <= limiter.MaxKeyLen && strings.IndexAny(v, `\|`) < 0 && limiter.ValidateKey(v) == nil {
			return v
		}
	}
	b := (*buf)[:0]
	defer func() { *buf = b[:0] }()
	for i, e := range d.GetEntries() {
		if i > 0 {
			b = append(b, '|')
		}
		v := e.GetValue()
		if i < len(path) && path[i].share {
			v = path[i].value
		}
		for j := 0; j < len(v); j++ {
			if c := v[j]; c == '\\' || c == '|' {
				b = append(b, '\\')
			}
			b = append(b, v[j])
		}
		if len(b) > limiter.MaxKeyLen {
			break
		}
	}
	if len(b) <= limiter.MaxKeyLen && limiter.ValidateKey(string(b)) == nil {
		return string(b)
	}
	h := sha256.New()
	var n [8]byte
	for i, e := range d.GetEntries() {
		v := e.GetValue()
		if i < len(path) && path[i].share {
			v = path[i].value
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	sum := h.Sum(nil)
	return `\h` + hex.EncodeToString(sum[:16])
}

// ruleKey is the key a usage rule of a descriptor reads with: the value of the
// descriptor's own entry, or, when that is no valid window key (empty, over
// limiter.MaxKeyLen bytes, a control character), "\h" + hex of its SHA-256.
// Ingest refuses such keys, so no series of the value can exist: a {key} rule
// finds no usage, as it would for the value itself, and a rule reading a fixed
// series ("*") still applies.
func ruleKey(v string) string {
	if limiter.ValidateKey(v) == nil {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return `\h` + hex.EncodeToString(sum[:16])
}

// PolicyPrefix starts the name of every policy and rule a configuration file
// defines, so they cannot clash with the policies of slide serve --policies.
const PolicyPrefix = "rls."

// policyName maps a descriptor to its limiter policy name: "rls." + domain +
// "." + envoy's full key (key or key_value, joined with "."), when that is a
// valid policy name (at most 64 of A-Z a-z 0-9 _ . -). Otherwise the invalid
// characters become '-', the name is cut to fit, and "-" + 8 hex digits of the
// FNV-1a hash of domain + "\x00" + path are appended, so distinct descriptors
// keep distinct names.
func policyName(domain, path string) string {
	raw := PolicyPrefix + domain + "." + path
	if limiter.ValidName(raw) {
		return raw
	}
	h := fnv.New32a()
	h.Write([]byte(domain))
	h.Write([]byte{0})
	h.Write([]byte(path))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	b := make([]byte, 0, 64)
	for i := 0; i < len(raw) && len(b) < 64-len(suffix); i++ {
		c := raw[i]
		if !limiter.NameByte(c) {
			c = '-'
		}
		b = append(b, c)
	}
	return string(b) + suffix
}

// nameWithSuffix appends suffix to a policy name, keeping it within 64 bytes.
func nameWithSuffix(name, suffix string) string {
	if len(name)+len(suffix) <= 64 {
		return name + suffix
	}
	return name[:64-len(suffix)] + suffix
}

// cost is the descriptor's hits_addend when set (0 allowed: a peek), else the
// request's, else 1.
func cost(req *pb.RateLimitRequest, d *rlv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return clampCost(h.GetValue())
	}
	if h := req.GetHitsAddend(); h != 0 {
		return int64(h)
	}
	return 1
}

func clampCost(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
