package cluster

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// stopping matches nothing once its context is done, within scanCheck series, and looks
// at the context on the first one.
func TestStoppingStopsWithinACheck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inner := 0
	match := stopping(ctx, func(string, int32) bool { inner++; return true })
	const cancelAt, total = 1000, 100_000
	matched := 0
	for i := range total {
		if i == cancelAt {
			cancel()
		}
		if match("k", 0) {
			matched++
		}
	}
	if inner != matched || matched < cancelAt || matched > cancelAt+scanCheck {
		t.Fatalf("cancelled at %d of %d: %d matched (%d inner calls), want %d..%d", cancelAt, total, matched, inner, cancelAt, cancelAt+scanCheck)
	}
	if stopping(ctx, func(string, int32) bool { return true })("k", 0) {
		t.Fatal("a scan whose context is already done matched its first series")
	}
}

// A fan-out read whose client has gone returns the context's error, visits no series and
// asks no peer; a peer read whose asker has gone answers nothing.
func TestReadsStopWithTheirContext(t *testing.T) {
	ti := newTwo(t, "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var p window.Partial
	if _, err := ti.a.Merge(ctx, t0, "m", "k-*", 5*time.Minute, true, &p); !errors.Is(err, context.Canceled) || p.Series != 0 {
		t.Errorf("Merge: %v with %d series, want context.Canceled and none", err, p.Series)
	}
	n := 0
	if _, err := ti.a.Each(ctx, t0, "m", "", 5*time.Minute, true, func(string, *window.Partial) { n++ }); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("Each: %v after %d series, want context.Canceled and none", err, n)
	}
	g, err := window.NewGroupPartials([]string{"key"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ti.a.MergeGroups(ctx, t0, "m", "k-*", nil, 5*time.Minute, true, g); !errors.Is(err, context.Canceled) || g.Len() != 0 {
		t.Errorf("MergeGroups: %v with %d groups, want context.Canceled and none", err, g.Len())
	}
	if ids, _, err := ti.a.Keys(ctx, "", "", nil, nil, 0); !errors.Is(err, context.Canceled) || len(ids) != 0 {
		t.Errorf("Keys: %v with %d ids, want context.Canceled and none", err, len(ids))
	}
	visited := 0
	if _, err := ti.a.VisitExtents(ctx, t0, t0, "m", nil, func(string, int64, int64) bool { visited++; return true }); !errors.Is(err, context.Canceled) || visited != 0 {
		t.Errorf("VisitExtents: %v with %d series, want context.Canceled and none", err, visited)
	}
	if hits := ti.peerHit.Load(); hits != 0 {
		t.Errorf("%d peer requests for reads whose client had gone", hits)
	}
	// Uncancelled, the same reads find series (so the above is not an empty store).
	if _, err := ti.a.Merge(context.Background(), t0, "m", "k-*", 5*time.Minute, true, &p); err != nil || p.Series == 0 {
		t.Fatalf("uncancelled Merge: %v with %d series", err, p.Series)
	}

	for _, op := range []string{opMerge, opSeries, opKeys, opGroups, opExtents} {
		r := request{op: op, metric: "m", key: "k-", winMs: 300_000, now: t0, at: t0, bins: true, parts: []int32{2, 3}}
		if op != opKeys {
			r.key = "k-*"
		}
		path := "/?" + r.rawQuery()
		req := httptest.NewRequestWithContext(ctx, "GET", path, nil)
		req.Header.Set(HeaderPeer, "test")
		w := httptest.NewRecorder()
		ti.b.PeerHandler().ServeHTTP(w, req)
		if w.Body.Len() != 0 {
			t.Errorf("peer %s for a gone asker: %d %d bytes, want nothing written", op, w.Code, w.Body.Len())
		}
		w = httptest.NewRecorder()
		req = httptest.NewRequestWithContext(context.Background(), "GET", path, nil)
		req.Header.Set(HeaderPeer, "test")
		ti.b.PeerHandler().ServeHTTP(w, req)
		if w.Code != 200 || w.Body.Len() < 8 {
			t.Errorf("peer %s uncancelled: %d with %d bytes", op, w.Code, w.Body.Len())
		}
	}
}
