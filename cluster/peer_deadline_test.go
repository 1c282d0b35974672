package cluster

import (
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/window"
)

// TestPeerReadStopsAtTheAskersDeadline: a peer read stops at the deadline its asker sent
// (HeaderDeadline), which nobody waits past, instead of reading every series: a read of
// 200,000 series asked with a deadline 5 ms ahead is cut (served 499, nothing written),
// while the same read without a deadline answers 200. It ran to its end, however long.
func TestPeerReadStopsAtTheAskersDeadline(t *testing.T) {
	ti := newTwoConfig(t, withRegistryB(prometheus.NewRegistry()), nil, false)
	for i := range 200_000 {
		ev := window.Event{TS: t0 - 1000, Metric: "m", Key: "x-" + strconv.Itoa(i), Value: 1, Feed: window.FeedOf(2)}
		if err := ti.storeB.ObserveAt(t0, ev); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(deadline string) int {
		q := url.Values{"op": {"series"}, "metric": {"m"}, "key": {"x-*"}, "window": {"300000"}, "now": {strconv.FormatInt(t0, 10)}, "parts": {"2"}}
		req := httptest.NewRequest("GET", PeerPath+"?"+q.Encode(), nil)
		req.Header.Set(HeaderPeer, "x:1")
		if deadline != "" {
			req.Header.Set(HeaderDeadline, deadline)
		}
		w := httptest.NewRecorder()
		ti.b.PeerHandler().ServeHTTP(w, req)
		return w.Body.Len()
	}
	if n := ask(""); n < 200_000 || testutil.ToFloat64(ti.b.m.served.WithLabelValues("200")) != 1 {
		t.Fatalf("without a deadline: %d bytes, served 200 %v times; want the 200,000 series", n, testutil.ToFloat64(ti.b.m.served.WithLabelValues("200")))
	}
	if n := ask(strconv.FormatInt(time.Now().Add(5*time.Millisecond).UnixMilli(), 10)); n != 0 || testutil.ToFloat64(ti.b.m.served.WithLabelValues("499")) != 1 {
		t.Fatalf("with a deadline 5 ms ahead: %d bytes written, served 499 %v times; want the read cut", n, testutil.ToFloat64(ti.b.m.served.WithLabelValues("499")))
	}
}
