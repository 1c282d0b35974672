package limiter

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestKeyPlansAsAMap: batches of changes (plans set, changed and dropped, keys never seen
// dropped) read back as a plain map applied the same way, through merges into the base; and
// a keyPlans once made never changes, since decisions read it without a lock while the next
// is made.
func TestKeyPlansAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 7))
	var k *keyPlans
	want := map[string]int32{}
	merges := 0
	for round := range 40 {
		prev, prevWant := k, maps.Clone(want)
		changes := map[string]int32{}
		for range 1 + rng.IntN(6000) {
			key := "tenant-" + strconv.Itoa(rng.IntN(30_000))
			j := int32(rng.IntN(4)) - 1 // noPlan or a plan
			changes[key] = j
			if j == noPlan {
				delete(want, key)
			} else {
				want[key] = j
			}
		}
		k = k.with(changes)
		if len(k.over) == 0 {
			merges++
		}
		check := func(k *keyPlans, want map[string]int32, what string) {
			t.Helper()
			for i := range 30_000 {
				key := "tenant-" + strconv.Itoa(i)
				j, ok := k.get(key)
				if w, wok := want[key]; ok != wok || (ok && j != w) {
					t.Fatalf("round %d, %s: %s is %d %v, want %d %v", round, what, key, j, ok, w, wok)
				}
			}
			n := 0
			k.each(func(key string, j int32) {
				if want[key] != j {
					t.Fatalf("round %d, %s: each gave %s %d, want %d", round, what, key, j, want[key])
				}
				n++
			})
			if n != len(want) {
				t.Fatalf("round %d, %s: each gave %d keys, want %d", round, what, n, len(want))
			}
		}
		check(k, want, "the new one")
		if prev != nil {
			check(prev, prevWant, "the one before")
		}
	}
	if merges < 2 {
		t.Fatalf("%d merges into the base over 40 rounds, want several", merges)
	}
}
