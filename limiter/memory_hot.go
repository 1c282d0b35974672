package limiter

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// takeTokenBucket is store.take for the token bucket, the algorithm most policies use,
// with the decision on the hot entry (the key used last in its shard: the one flooding)
// written for the concrete type: the bucket's take is then a static call, where the
// generic take reaches it through step's type switch on a shape-stenciled state, and the
// hot hit skips the generic path's checks for growth and bytes, which a token bucket never
// has. Every other case (another key, a sweep due) goes on in the generic takeLocked, so
// the decisions are take's, bit for bit (#19: the decision ≤ 0.5× x/time/rate AllowN).
func takeTokenBucket(st *store[tokenBucket], p *params, key string, now, cost int64, d *Decision) int {
	var h uint64
	if n := uint(len(key)); n-8 <= 8 {
		// keyHasher.hash of a key of 8 to 16 bytes (tenant ids, most keys), written out:
		// the inliner will not take hash itself, and the call was a tenth of the decision.
		// TestTokenBucketHashIsKeyHash holds the two equal.
		b := unsafe.Slice(unsafe.StringData(key), n)
		hi, lo := bits.Mul64(binary.LittleEndian.Uint64(b)^st.keys.s1, binary.LittleEndian.Uint64(b[n-8:])^st.keys.seed)
		h = mix(lo^st.keys.s0^uint64(n), hi^st.keys.s1)
	} else {
		h = st.keys.hash(key)
	}
	sh := &st.shards[h&st.mask]
	sh.mu.Lock()
	if e := sh.hot; e != nil && now < sh.nextSweep && e.hash == h && sameKey(e.key, key) {
		if exp := e.s.take(p, now, cost, d); exp > e.expires {
			e.expires = exp
		}
		sh.mu.Unlock()
		return takeOK
	}
	return st.takeLocked(sh, h, p, key, now, cost, d)
}
