package clusterlimit

import (
	"context"
	"slices"
	"time"
)

// stopIfExpelled stops deciding every partition once the group, described since this
// generation began, has no member at this instance's address: its session ran out (the
// process was stopped or starved) and the others decide its partitions now. Until its
// consumer notices and rejoins, this instance would otherwise go on deciding from its
// stale memory and checkpoint it. No final record is written; the keys are forgotten.
func (b *Backend) stopIfExpelled() {
	b.own.mu.RLock()
	since, owns := b.own.since, b.own.tracked && len(b.own.owned) > 0
	b.own.mu.RUnlock()
	if !owns || !b.g.MemberGone(b.g.Self(), since) {
		return
	}
	b.own.mu.Lock()
	if !b.own.since.Equal(since) { // a generation began meanwhile: its hook saw to it
		b.own.mu.Unlock()
		return
	}
	ps := make([]int32, 0, len(b.own.owned))
	for p := range b.own.owned {
		ps = append(ps, p)
	}
	b.own.owned, b.own.ready = map[int32]bool{}, map[int32]bool{}
	b.own.mu.Unlock()
	slices.Sort(ps)
	b.log.Warn("clusterlimit: the consumer group goes on without this instance (its session ran out); it stops deciding its partitions until it rejoins",
		"partitions", ps)
	b.handover(func() { b.forget(ps) })
}

// partitions is the topic's partition count once the group was described, 0 if ctx ends
// first. An instance just started gains partitions before its first describe: checked
// against a count of none, every restored key looked like another partition's and was
// dropped, and the partition started afresh.
func (b *Backend) partitions(ctx context.Context) int {
	for {
		if n := b.g.Partitions(); n > 0 || ctx.Err() != nil {
			return n
		}
		b.g.Describe(ctx, time.Time{}) // describes only while there is no view
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
