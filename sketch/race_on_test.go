//go:build race

package sketch

// raceEnabled: the race detector slows the exhaustive index sweeps many times; they stride.
const raceEnabled = true
