package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// TestOffsetResetsExportedFromAssignment: slide_ingest_offset_resets_total{partition,reason}
// is 0 for every partition this instance reads from the moment it is assigned, as a
// counter alerted on must be. A child first made by the reset itself is born at 1, and
// Prometheus' increase() reads nothing from a series' first sample: the alert
// increase(slide_ingest_offset_resets_total[5m]) > 0 never fired for a broker that lost
// its log (found by restarting `slide broker` under a scraping Prometheus).
func TestOffsetResetsExportedFromAssignment(t *testing.T) {
	cl := kafkatest.Start(t, "events", 2)
	r := start(t, testConfig(cl, "resets"), newTestStore(t, 0), time.Now())
	eventually(t, 15*time.Second, "both partitions live", func() bool { return caughtUp(t, cl, r) }, progress(r))
	want := `
# HELP slide_ingest_offset_resets_total Times a partition's next offset was out of the log's range and reading moved to the first record of the restore span that the log still holds, by partition and reason (retention: deleted before it was read; log_truncated: the log ends before it, e.g. a broker restarted empty or an unclean leader election).
# TYPE slide_ingest_offset_resets_total counter
slide_ingest_offset_resets_total{partition="0",reason="log_truncated"} 0
slide_ingest_offset_resets_total{partition="0",reason="retention"} 0
slide_ingest_offset_resets_total{partition="1",reason="log_truncated"} 0
slide_ingest_offset_resets_total{partition="1",reason="retention"} 0
`
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(want), "slide_ingest_offset_resets_total"); err != nil {
		t.Error(err)
	}
}
