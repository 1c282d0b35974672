package cluster

import (
	"time"

	"github.com/slide-metrics/slide/window"
)

// Whether one-key reads may be one hop is a declaration about every producer of the topic
// (Config.KeyPartitioner): nothing an instance sees proves it, since another producer may
// write a key to any partition at any time. What an instance can see is evidence against
// it, in the series it holds: each remembers the partition that last fed it, and a series
// whose key murmur2 places elsewhere is a key the producers did not partition by murmur2.
// CheckKeyPartitioner looks for such series every KeyCheckInterval: with the declaration
// made, one found turns this instance's routing off (its one-key reads fan out again, exact
// whatever the producers do) and is logged and exported, for the operator to fix the
// producers or withdraw the flag everywhere; without it, a store whose keyed series all
// agree with murmur2 earns a one-time hint that the flag would make one-key reads one hop.

// KeyCheckInterval is how often Run looks for series that contradict murmur2.
const KeyCheckInterval = time.Minute

// maxKeyChecks bounds the series one check looks at (the scan holds each shard's lock
// while it runs).
const maxKeyChecks = 100_000

// minKeyHint is the number of keyed series, every one on murmur2's partition, that a store
// must hold before the hint is logged: fewer agree with murmur2 by chance too often.
const minKeyHint = 1000

// KeyCheck is what one CheckKeyPartitioner found.
type KeyCheck struct {
	Checked int    // series fed by a partition whose key was looked at
	Off     int    // those on another partition than murmur2(key) mod the partitions
	Example string // one such series' key, "" when Off is 0
	Wrong   int32  // its partition
	Want    int32  // the partition murmur2 gives its key
}

// CheckKeyPartitioner looks at the series this instance holds (at most 100,000) for keys
// on another partition than murmur2 gives them, exports the count in
// slide_cluster_key_partition_mismatches, and acts on it: with --key-partitioner murmur2
// declared, any such series turns routing off on this instance for the rest of its life
// (reads fan out), logged as a warning the first time; without it, a store of at least
// 1,000 keyed series all on murmur2's partition logs the hint, once. Before the topic's
// partitions are known, or with one partition, it finds nothing.
func (c *Cluster) CheckKeyPartitioner() KeyCheck {
	var kc KeyCheck
	n := c.Partitions()
	if n <= 1 {
		return kc
	}
	c.cfg.Store.EachSeries(func(_, s string, p int32) {
		if p < 0 || kc.Checked >= maxKeyChecks {
			return
		}
		key := window.SeriesKeyOf(s)
		if key == "" {
			return
		}
		kc.Checked++
		if want := murmur2Partition(key, n); want != p {
			kc.Off++
			if kc.Example == "" {
				kc.Example, kc.Wrong, kc.Want = key, p, want
			}
		}
	})
	c.m.keyOff.Set(float64(kc.Off))
	switch {
	case kc.Off > 0 && c.cfg.KeyPartitioner != "" && c.routeOff.CompareAndSwap(false, true): // logged once; the gauge follows
		c.log.Warn("cluster: --key-partitioner murmur2 is declared, but series here sit on another partition than murmur2 gives their key: this instance's one-key reads fan out from now on; other instances routing such keys miss their events until the producers key by murmur2 or the flag is withdrawn",
			"series", kc.Off, "of", kc.Checked, "key", clip(kc.Example), "partition", kc.Wrong, "murmur2_partition", kc.Want)
	case kc.Off == 0 && kc.Checked >= minKeyHint && c.cfg.KeyPartitioner == "" && !c.Local() && c.hinted.CompareAndSwap(false, true):
		c.log.Info("cluster: every keyed series here sits on the partition murmur2 gives its key; if every producer of the topic keys records by murmur2 (Java clients, slide produce), --key-partitioner murmur2 makes one-key reads one hop instead of a fan-out to every instance",
			"series", kc.Checked)
	}
	return kc
}
