package cluster

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
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
			// A read by labels of the same key (match=, by=) routes alike.
			var before [3]int64
			for i, in := range ins {
				before[i] = in.asked.Load()
			}
			g, err := window.NewGroupPartials([]string{"route"}, false)
			if err != nil {
				t.Fatal(err)
			}
			if missing, err := ins[0].cl.MergeGroups(context.Background(), time.Now().UnixMilli(), "latency_ms", key, nil, 5*time.Minute, false, g); err != nil || len(missing) != 0 {
				t.Fatalf("MergeGroups %s: missing %v, err %v", key, missing, err)
			}
			for i, in := range ins {
				asked[i] = in.asked.Load() - before[i]
			}
			if asked != want {
				t.Errorf("declared %v, MergeGroups of key %s of instance %d: peers asked %v, want %v", declared, key, owner, asked, want)
			}
		}
		if asked, p := read("tenant-*"); asked != [3]int64{0, 1, 1} || p.Count != 60*20 {
			t.Errorf("declared %v, a glob: peers asked %v, want [0 1 1]; count %v, want %d", declared, asked, p.Count, 60*20)
		}
	}
}

// A series on another partition than murmur2 gives its key contradicts a declared
// partitioner: the check finds it and this instance's one-key reads fan out from then on.
// Without the declaration, a store whose keyed series all agree logs the hint, once.
func TestKeyCheck(t *testing.T) {
	var warned strings.Builder
	ins := benchClusterWith(t, 3, 60, func(c *Config) {
		c.KeyPartitioner = "murmur2"
		c.Logger = slog.New(slog.NewTextHandler(&warned, nil))
	})
	a := ins[0].cl
	if kc := a.CheckKeyPartitioner(); kc.Off != 0 || kc.Checked == 0 || a.routeOff.Load() {
		t.Fatalf("murmur2-keyed store: %+v, routing off %v", kc, a.routeOff.Load())
	}
	remote := keyOn(1, 3)
	hops := func() int64 {
		before := ins[1].asked.Load() + ins[2].asked.Load()
		var p window.Partial
		if missing, err := a.Merge(context.Background(), time.Now().UnixMilli(), "latency_ms", remote, 5*time.Minute, false, &p); err != nil || len(missing) != 0 {
			t.Fatalf("missing %v, err %v", missing, err)
		}
		return ins[1].asked.Load() + ins[2].asked.Load() - before
	}
	if n := hops(); n != 1 {
		t.Fatalf("routed read before the check: %d peer requests, want 1", n)
	}
	// Another producer writes the remote key to partition 0, which instance 0 consumes.
	now := time.Now().UnixMilli()
	if err := ins[0].store.ObserveAt(now, window.Event{TS: now, Metric: "latency_ms", Key: remote, Value: 1, Feed: window.FeedOf(0)}); err != nil {
		t.Fatal(err)
	}
	kc := a.CheckKeyPartitioner()
	if kc.Off != 1 || kc.Example != remote || kc.Wrong != 0 || kc.Want != partitionOf(remote) || !a.routeOff.Load() {
		t.Errorf("one series on partition 0: %+v, routing off %v", kc, a.routeOff.Load())
	}
	if n := hops(); n != 2 {
		t.Errorf("read after the check: %d peer requests, want 2 (fan-out)", n)
	}
	if kc := a.CheckKeyPartitioner(); kc.Off != 1 {
		t.Errorf("second check: %+v", kc)
	}
	if n := strings.Count(warned.String(), "--key-partitioner murmur2 is declared, but"); n != 1 {
		t.Errorf("warned %d times over two checks, want once:\n%s", n, warned.String())
	}

	var log strings.Builder
	ins = benchClusterWith(t, 3, 3000, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	for range 2 {
		if kc := ins[0].cl.CheckKeyPartitioner(); kc.Off != 0 || kc.Checked < minKeyHint {
			t.Fatalf("undeclared, murmur2-keyed store: %+v", kc)
		}
	}
	if n := strings.Count(log.String(), "--key-partitioner murmur2 makes one-key reads one hop"); n != 1 {
		t.Errorf("hint logged %d times, want once:\n%s", n, log.String())
	}
}

// A producer's name for its partitioner, given as the declaration, is refused with what it
// means here.
func TestKeyPartitionerNames(t *testing.T) {
	for name, want := range map[string]string{
		"murmur2_random": "declare murmur2",
		"Murmur2":        "declare murmur2",
		"org.apache.kafka.clients.producer.internals.DefaultPartitioner": "declare murmur2",
		"consistent_random": "leave it empty",
		"crc32":             "leave it empty",
		"fnv1a":             "leave it empty",
		"sticky-ish":        "only murmur2 (or empty: fan out)",
	} {
		cfg := Config{Store: newStore(t), Brokers: []string{"127.0.0.1:1"}, Advertise: "127.0.0.1:1", Local: func() []int32 { return nil }}
		cfg.KeyPartitioner = name
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("%s: %v, want it to say %q", name, err, want)
		}
	}
	cfg := Config{Store: newStore(t), Brokers: []string{"127.0.0.1:1"}, Advertise: "127.0.0.1:1", Local: func() []int32 { return nil }, KeyPartitioner: "murmur2"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("murmur2: %v", err)
	}
}
