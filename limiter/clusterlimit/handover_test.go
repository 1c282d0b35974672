package clusterlimit

import (
	"context"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/limiter"
)

// allParts are the partitions of the events topic of a handover.
var allParts = []int32{0, 1, 2, 3, 4, 5}

// handover is a group of instances over a real (embedded) broker, checkpointing every hour
// (so only the records a test asks for are written), whose partitions a test moves by hand:
// the truth (handTo) first, each instance's view when it describes.
type handover struct {
	t   *testing.T
	tp  *topo
	ins []*instance
}

// startHandover starts n instances deciding policy p (fail closed), their checkpoints
// waiting up to wait for a predecessor's final record.
func startHandover(t *testing.T, n int, wait time.Duration, p limiter.Policy) *handover {
	broker := kafkatest.Start(t, "events", len(allParts))
	tp, ins := startGroup(t, n, clusterPolicy(p, limiter.FailClosed, 5*time.Second))
	cfg := CheckpointConfig{Interval: time.Hour, Wait: wait, Brokers: []string{broker.Addr}, Topic: "events", Group: "g"}
	for _, in := range ins {
		if err := in.b.SetCheckpoints(cfg); err != nil {
			t.Fatal(err)
		}
	}
	return &handover{t: t, tp: tp, ins: ins}
}

// handTo makes in the owner of every partition; the views stay as they were until describe.
func (h *handover) handTo(in *instance) {
	for _, q := range allParts {
		h.tp.set(q, in.g.self)
	}
}

// describe has every instance describe the group now.
func (h *handover) describe() {
	for _, in := range h.ins {
		in.g.Describe(context.Background(), time.Now())
	}
}

// waitReady waits up to 10 s for in to have restored every partition it owns.
func (h *handover) waitReady(in *instance) {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); in.b.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: %v after 10s", in.g.self, in.b.Ready())
		}
	}
}
