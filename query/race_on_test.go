//go:build race

package query_test

// raceEnabled: the race detector slows memory-heavy paths several times; time bounds widen.
const raceEnabled = true
