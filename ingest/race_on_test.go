//go:build race

package ingest

// raceEnabled: the race detector keeps shadow memory beside the heap, so memory bounds
// measured in RSS are wider under it.
const raceEnabled = true
