package reliability_test

import (
	"testing"

	"github.com/slide-metrics/slide/internal/proctest"
)

// brokerProc runs `slide broker` with 4 partitions in its own process.
func brokerProc(t *testing.T, extra ...string) (*proctest.Proc, string) {
	t.Helper()
	return proctest.Broker(t, slideBin, 4, extra...)
}
