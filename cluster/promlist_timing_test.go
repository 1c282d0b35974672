package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/window"
)

// slotsListing is a Cluster whose listings read every slot, as they did before
// VisitExtents: VisitSlots, then each series' cur and first slot. The benchmark's before.
type slotsListing struct{ *Cluster }

func (s slotsListing) VisitExtents(ctx context.Context, wall, at int64, metric string, ms []window.Matcher, fn func(series string, cur, first int64) bool) ([]int32, error) {
	return s.VisitSlots(ctx, wall, at, metric, ms, func(series string, cur int64, slots []window.SlotView) bool {
		return len(slots) == 0 || fn(series, cur, slots[0].Index)
	})
}

// BenchmarkPromListing: GET /api/v1/label/key/values?match[]=latency_ms through instance A
// of two on loopback holding 100,000 series of latency_ms between them (20 events each over
// the last 5 minutes: dense rings), one request at a time, reading every slot (slots: the
// listing before VisitExtents) and each series' current and first slot (extents),
// alternated over three rounds on the same instances (the answer is cut at the default
// MaxLabelValues, 10,000 keys; the read is of every series). It reports ms a listing (ms/list) and
// the bytes of the peer's answers a listing (peer_B/list); B/op and allocs/op count both
// instances, which share the process. store_slots and store_first time one instance's
// store visit of its 50,000 series as a listing on one store reads it, before
// (VisitSlots) and after (VisitFirstSlots).
func BenchmarkPromListing(b *testing.B) {
	two := benchCluster(b, 2, 100_000)
	apis := map[string]http.Handler{}
	for name, c := range map[string]promapi.Cluster{"slots": slotsListing{two[0].cl}, "extents": two[0].cl} {
		api, err := promapi.New(promapi.Config{Store: two[0].store, Cluster: c}) // the clock: the peers check the read time against theirs
		if err != nil {
			b.Fatal(err)
		}
		apis[name] = api.Handler()
	}
	list := func(b *testing.B, h http.Handler) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/label/key/values?match[]=latency_ms", nil))
		if n := strings.Count(rec.Body.String(), `","`) + 1; rec.Code != http.StatusOK || n < promapi.DefaultMaxLabelValues {
			b.Fatalf("%d, %d keys: %.300s", rec.Code, n, rec.Body)
		}
	}
	for round := range 3 {
		for _, name := range []string{"slots", "extents"} {
			b.Run(fmt.Sprintf("%s/round%d", name, round), func(b *testing.B) {
				list(b, apis[name])
				sent := two[1].sent.Load()
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					list(b, apis[name])
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(elapsed.Seconds()*1e3/float64(b.N), "ms/list")
				b.ReportMetric(float64(two[1].sent.Load()-sent)/float64(b.N), "peer_B/list")
			})
		}
		st, at := two[0].store, time.Now().UnixMilli()
		b.Run(fmt.Sprintf("store_slots/round%d", round), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				n := 0
				st.VisitSlots(at, "latency_ms", nil, nil, func(_ string, _ int64, slots []window.SlotView) bool {
					n += len(slots[:1])
					return true
				})
				if n < 40_000 {
					b.Fatalf("%d series", n)
				}
			}
		})
		b.Run(fmt.Sprintf("store_first/round%d", round), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				n := 0
				st.VisitFirstSlots(at, "latency_ms", nil, nil, nil, func(_ string, _, _ int64, live bool) bool {
					if live {
						n++
					}
					return true
				})
				if n < 40_000 {
					b.Fatalf("%d series", n)
				}
			}
		})
	}
}
