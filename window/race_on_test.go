//go:build race

package window

// raceEnabled: the race detector makes each memory access several times dearer; tests that
// only measure (one goroutine, no sharing) scale their sizes down under it.
const raceEnabled = true
