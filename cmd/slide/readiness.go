package main

import "sync/atomic"

// gate is one of serve's readiness conditions: check fails while the instance should not
// take traffic (nil check: always passes). An untilReady gate holds readiness only until
// the instance was first ready; after that its failures no longer take the instance out,
// and the instance names them in /readyz's 200 instead (query.Config.RestoringLimits).
type gate struct {
	check      func() error
	untilReady bool
}

// readiness is serve's /readyz verdict over gates, in order: the first failing gate's
// error, or nil once all pass. The first nil latches the untilReady gates off.
func readiness(gates ...gate) func() error {
	var was atomic.Bool
	return func() error {
		for _, g := range gates {
			if g.check == nil || g.untilReady && was.Load() {
				continue
			}
			if err := g.check(); err != nil {
				return err
			}
		}
		was.Store(true)
		return nil
	}
}
