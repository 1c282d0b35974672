package limiter

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTokenBucketHashIsKeyHash: the token bucket's hot path hashes keys of 8 to 16 bytes
// with its own copy of keyHasher.hash; every entry it makes, for keys of every length,
// carries keyHasher.hash of its key, and a second decision finds it (no new entry).
func TestTokenBucketHashIsKeyHash(t *testing.T) {
	m, err := NewMemory(Policy{Name: "api", Algorithm: TokenBucket, Capacity: 3, RefillPerSecond: 1}, MemoryConfig{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_764_489_600, 0)
	var keys []string
	for n := 1; n <= 40; n++ {
		keys = append(keys, strings.Repeat("k", n-1)+string(rune('a'+n%26)), "tenant-"+strings.Repeat("9", n))
	}
	for round := range 2 {
		for _, k := range keys {
			if _, err := m.AllowN(context.Background(), k, now, 1); err != nil {
				t.Fatalf("%q: %v", k, err)
			}
		}
		if got := m.Len(); got != len(keys) {
			t.Fatalf("round %d: %d keys held, want %d", round, got, len(keys))
		}
	}
	st := m.tb
	for _, k := range keys {
		h := st.keys.hash(k)
		sh := &st.shards[h&st.mask]
		if e, _ := sh.lookup(h, k); e == nil || e.hash != h {
			t.Errorf("%q (%d bytes): no entry under keyHasher.hash", k, len(k))
		}
	}
}
