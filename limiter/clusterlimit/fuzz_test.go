package clusterlimit

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// FuzzDecode holds the decoders of hostile bytes to their word: a batch or an answer of the
// peer route, and a checkpoint record (anyone who can write to the checkpoint topic can
// write one), either decodes or is refused with ErrCorrupt; never a panic, never an
// allocation beyond the bounds.
func FuzzDecode(f *testing.F) {
	calls := []*call{
		{it: item{policy: "login", fp: 0xfeedface, key: "tenant-1", now: time.Unix(1_764_489_600, 0).UnixNano(), cost: 1}},
		{it: item{policy: "api", fp: 1, key: "ключ", now: -5, cost: 0}},
	}
	f.Add(appendRequest(nil, calls))
	f.Add(appendAnswer(nil, []result{{status: StatusOK, d: limiter.Decision{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: time.Minute}},
		{status: StatusStale}, {status: StatusOK, d: limiter.Decision{Limit: 3, RetryAfter: time.Second, Delay: 5}}}))
	entries := appendEntry(nil, "login", 7, "tenant-1", 1_764_489_660_000_000_000, []byte{2, 4})
	entries = appendEntry(entries, "api", 8, "tenant-2", 5, nil)
	f.Add(appendCheckpoint(nil, 12, true, 1_764_489_600_000, 2, entries))
	f.Add([]byte{version, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := decodeRequest(b)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeRequest: %v, not ErrCorrupt", err)
		}
		if err == nil {
			cs := make([]*call, len(items))
			for i := range items {
				cs[i] = &call{it: items[i]}
			}
			if again := appendRequest(nil, cs); !bytes.Equal(again, b) {
				// Varints have one shortest form; a longer one decodes but re-encodes shorter.
				if back, err := decodeRequest(again); err != nil || len(back) != len(items) {
					t.Fatalf("re-encoded batch does not decode alike: %v", err)
				}
			}
		}
		if cp, err := decodeCheckpoint(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeCheckpoint: %v, not ErrCorrupt", err)
		} else if err == nil {
			var again []byte
			for _, e := range cp.entries {
				again = appendEntry(again, e.policy, e.fp, e.key, e.expires, e.state)
			}
			back, err := decodeCheckpoint(appendCheckpoint(nil, cp.gen, cp.final, cp.at, len(cp.entries), again))
			if err != nil || len(back.entries) != len(cp.entries) || back.final != cp.final || back.gen != cp.gen {
				t.Fatalf("re-encoded checkpoint does not decode alike: %v", err)
			}
		}
		n := 0
		if len(b) > 1 {
			n = int(b[1] & 0x7f)
		}
		res, err := decodeAnswer(b, n)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeAnswer: %v, not ErrCorrupt", err)
		}
		if err == nil {
			for _, r := range res {
				if r.d.Remaining > r.d.Limit || r.d.RetryAfter < 0 || r.d.ResetAfter < 0 || r.d.Delay < 0 {
					t.Fatalf("decoded an impossible decision %+v", r.d)
				}
			}
		}
	})
}
