package clusterlimit

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// FuzzDecode holds the peer route's decoders to hostile bytes: a batch or an answer either
// decodes to what encodes back to the same bytes, or is refused with ErrCorrupt; never a
// panic, never an allocation beyond the bounds.
func FuzzDecode(f *testing.F) {
	calls := []*call{
		{it: item{policy: "login", fp: 0xfeedface, key: "tenant-1", now: time.Unix(1_764_489_600, 0).UnixNano(), cost: 1}},
		{it: item{policy: "api", fp: 1, key: "ключ", now: -5, cost: 0}},
	}
	f.Add(appendRequest(nil, calls))
	f.Add(appendAnswer(nil, []result{{status: StatusOK, d: limiter.Decision{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: time.Minute}},
		{status: StatusStale}, {status: StatusOK, d: limiter.Decision{Limit: 3, RetryAfter: time.Second, Delay: 5}}}))
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
