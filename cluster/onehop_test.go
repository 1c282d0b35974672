package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// keyOn is a key of the benchmark fixture whose partition belongs to instance i of n.
func keyOn(i, n int) string {
	for k := 0; ; k++ {
		key := "tenant-" + strconv.Itoa(k)
		if int(partitionOf(key))%n == i {
			return key
		}
	}
}

// A one-key read whose owner is known (murmur2 declared) asks exactly that owner, once;
// a key this instance holds asks nobody; a glob still asks every other owner; and without
// the declaration the same one-key read fans out to every owner. Each read is whole.
func TestKnownOwnerIsOneHop(t *testing.T) {
	for _, declared := range []bool{true, false} {
		ins := benchClusterWith(t, 3, 60, func(c *Config) {
			if declared {
				c.KeyPartitioner = "murmur2"
			}
		})
		read := func(key string) (asked [3]int64, p window.Partial) {
			var before [3]int64
			for i, in := range ins {
				before[i] = in.asked.Load()
			}
			missing, err := ins[0].cl.Merge(context.Background(), time.Now().UnixMilli(), "latency_ms", key, 5*time.Minute, false, &p)
			if err != nil || len(missing) != 0 {
				t.Fatalf("declared %v, key %s: missing %v, err %v", declared, key, missing, err)
			}
			for i, in := range ins {
				asked[i] = in.asked.Load() - before[i]
			}
			return asked, p
		}
		for owner := range 3 {
			key := keyOn(owner, 3)
			asked, p := read(key)
			want := [3]int64{0, 1, 1} // fan-out: every other instance
			if declared {
				want = [3]int64{}
				if owner != 0 {
					want[owner] = 1 // one hop, to the owner alone
				}
			}
			if asked != want || p.Count != 20 {
				t.Errorf("declared %v, key %s of instance %d: peers asked %v, want %v; count %v, want 20", declared, key, owner, asked, want, p.Count)
			}
		}
		if asked, p := read("tenant-*"); asked != [3]int64{0, 1, 1} || p.Count != 60*20 {
			t.Errorf("declared %v, a glob: peers asked %v, want [0 1 1]; count %v, want %d", declared, asked, p.Count, 60*20)
		}
	}
}
