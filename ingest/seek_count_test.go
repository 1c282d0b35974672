package ingest

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// TestFetchAsksNoOffsetsThePlanHas: a partition's fetch starts at the offset its plan
// chose without asking the broker for the log's bounds again (kafka-go's checked Seek,
// two ListOffsets round trips, which at a busy broker wait behind the other partitions'
// fetches: 5-20 ms before a partition's first fetch in BenchmarkEndToEndSpans). An offset
// retention passed meanwhile is the fetch's OffsetOutOfRange
// (TestFetchSkipsRecordsDeletedByRetention).
func TestFetchAsksNoOffsetsThePlanHas(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(12, 12))
	msgs := records(rng, genEvents(rng, t0, 100, 3))
	c.ProduceTo(t, 0, msgs...)
	var lists atomic.Int32
	k := c.Kfake()
	k.ControlKey(kmsg.ListOffsets.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		lists.Add(1)
		return nil, nil, false
	})
	r := start(t, testConfig(c, "seek"), newTestStore(t, 0), t0)
	// Waited for by the consumer's progress: caughtUp would ask the broker for offsets too.
	eventually(t, 10*time.Second, "the consumer to catch up", func() bool {
		pr := r.Progress()
		return pr.Ready && len(pr.Partitions) == 1 && pr.Partitions[0].Next >= int64(len(msgs))
	}, progress(r))
	// The plan asks the log's start and end; its restore search reads records, not offsets.
	if n := lists.Load(); n > 2 {
		t.Errorf("the broker was asked for offsets %d times; the plan's 2 are all a start needs", n)
	}
}
