//go:build race

package event

// raceEnabled: under the race detector sync.Pool drops what is put back at random, so a
// pooled decoder is sometimes made anew.
const raceEnabled = true
