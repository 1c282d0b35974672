package limiter

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

func TestSameKey(t *testing.T) {
	keys := []string{"", "a", "ab", "tenant-4", "tenant-42", "tenant-43", "Tenant-42", "tenant-42-with-a-long-tail", "tenant-42-with-a-long-taiL", strings.Repeat("x", 16), strings.Repeat("x", 15) + "y", "y" + strings.Repeat("x", 15)}
	for _, a := range keys {
		for _, b := range keys {
			// A fresh copy of b: equal keys never share their bytes in a store.
			if got := sameKey(a, strings.Clone(b)); got != (a == b) {
				t.Errorf("sameKey(%q, %q) = %v", a, b, got)
			}
		}
	}
}

// The short-key hash keeps every byte and the length, and spreads keys over the shards.
func TestKeyHashSpread(t *testing.T) {
	h := newKeyHasher()
	seen := map[uint64]string{}
	shards := make([]int, 64)
	n := 0
	for i := range 50_000 {
		for _, k := range []string{fmt.Sprint(i), fmt.Sprintf("tenant-%d", i), fmt.Sprintf("10.%d.%d.1", i>>8, i&255), fmt.Sprintf("user-%d@example.org", i)} {
			v := h.hash(k)
			if old, dup := seen[v]; dup {
				t.Fatalf("%q and %q share hash %x", old, k, v)
			}
			seen[v] = k
			shards[v&63]++
			n++
		}
	}
	for i, c := range shards {
		if c < n/64*9/10 || c > n/64*11/10 {
			t.Fatalf("shard %d holds %d of %d keys, want within 10%% of %d", i, c, n, n/64)
		}
	}
	if h.hash("ab") == h.hash("ab\x00") || h.hash("") == h.hash("\x00") {
		t.Fatal("the length is not in the hash")
	}
	if h2 := newKeyHasher(); h2.hash("tenant-42") == h.hash("tenant-42") {
		t.Fatal("two hashers agree: the seed is not random")
	}
}

// Keys whose hashes collide share one map slot as a chain; lookups, removals from its
// head, middle and tail, and the key count stay right.
func TestStoreHashChains(t *testing.T) {
	st := newStore(grows[fixedWindow]{}, 1, limits{keys: 10, bytes: 1 << 20}, int64(1<<62), new(atomic.Int64), new(atomic.Int64))
	sh := &st.shards[0]
	const h = 42
	var es []*entry[fixedWindow]
	for _, k := range []string{"a", "b", "c", "d"} {
		_, head := sh.lookup(h, k)
		es = append(es, st.insert(sh, h, head, k, 0))
	}
	other := st.insert(sh, h+1, nil, "a", 0) // same key bytes, another hash: another entry
	check := func(want ...string) {
		t.Helper()
		if sh.n != len(want)+1 {
			t.Fatalf("n = %d, want %d", sh.n, len(want)+1)
		}
		for _, k := range []string{"a", "b", "c", "d"} {
			e, _ := sh.lookup(h, k)
			if in := strings.Contains(strings.Join(want, ""), k); (e != nil) != in || (e != nil && e.key != k) {
				t.Fatalf("lookup(%q) = %v, want present %v", k, e, in)
			}
		}
		if e, _ := sh.lookup(h+1, "a"); e != other {
			t.Fatal("lookup outside the chain")
		}
		if e, _ := sh.lookup(h, "e"); e != nil {
			t.Fatal("lookup outside the chain")
		}
	}
	check("a", "b", "c", "d")
	st.removeLocked(sh, es[1]) // middle
	check("a", "c", "d")
	st.removeLocked(sh, es[3]) // head: the newest is first
	check("a", "c")
	st.removeLocked(sh, es[0]) // tail
	check("c")
	st.removeLocked(sh, es[2])
	check()
	if len(sh.m) != 1 {
		t.Fatalf("map holds %d slots, want 1 (the other hash)", len(sh.m))
	}
}
