// Package polltest is the tests' one polling loop: wait for a condition (a metric reaching a
// value, a server answering) instead of sleeping a guessed time, with a bound that keeps a
// failure fast and a message that says what was awaited.
package polltest

import (
	"testing"
	"time"
)

// Eventually calls cond every interval until it returns true, or fails t after timeout with
// "after TIMEOUT: " and what() (called only on failure, so it may describe the state).
func Eventually(t testing.TB, timeout, interval time.Duration, cond func() bool, what func() string) {
	t.Helper()
	if !Until(timeout, interval, cond) {
		t.Fatalf("after %s: %s", timeout, what())
	}
}

// Until calls cond every interval until it returns true (Until reports true) or timeout
// passes (false, after one last call), for a test that reports the failure itself.
func Until(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(interval)
	}
	return true
}
