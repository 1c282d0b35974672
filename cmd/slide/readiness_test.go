package main

import (
	"errors"
	"testing"
)

// TestReadinessLatchesUntilReadyGates: the limiter state of cluster policies holds traffic
// back until the instance is first ready, and not after: a rebalance's restore of gained
// partitions (a rolling update gives every pod some at once) kept every pod out of its
// Service. The other gates hold it whenever they fail.
func TestReadinessLatchesUntilReadyGates(t *testing.T) {
	var backend, limits error
	ready := readiness(
		gate{check: func() error { return backend }},
		gate{check: func() error { return limits }, untilReady: true},
		gate{}, // no check: passes
	)
	limits = errors.New("restoring the limiter state of partitions [0 1]")
	if err := ready(); err != limits {
		t.Fatalf("before the first ready: %v, want %v", err, limits)
	}
	limits = nil
	if err := ready(); err != nil {
		t.Fatalf("all gates pass: %v", err)
	}
	limits = errors.New("restoring the limiter state of partitions [4]")
	if err := ready(); err != nil {
		t.Errorf("a later restore of limiter state took the instance out: %v", err)
	}
	backend = errors.New("kafka k:9092: connection refused")
	if err := ready(); err != backend {
		t.Errorf("a failing backend after the first ready: %v, want %v", err, backend)
	}
	fresh := readiness(gate{check: func() error { return backend }}, gate{check: func() error { return limits }, untilReady: true})
	backend = nil
	if err := fresh(); err != limits {
		t.Errorf("a gate that never passed latched: %v, want %v", err, limits)
	}
}
