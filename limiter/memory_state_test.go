package limiter

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestExportImportContinues: a key's state exported from one Memory and imported into a
// fresh one decides every later request as the first would have, for each algorithm; a
// state of another algorithm or cut short is refused.
func TestExportImportContinues(t *testing.T) {
	t0 := time.Unix(1_764_489_600, 0)
	for _, p := range []Policy{
		{Name: "fw", Algorithm: FixedWindow, Limit: 10, Window: time.Minute},
		{Name: "sl", Algorithm: SlidingLog, Limit: 10, Window: time.Minute},
		{Name: "sc", Algorithm: SlidingCounter, Limit: 10, Window: time.Minute},
		{Name: "tb", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 0.5},
		{Name: "lb", Algorithm: LeakyBucket, Capacity: 10, LeakPerSecond: 0.5},
	} {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			ctx := context.Background()
			a, _ := NewMemory(p, MemoryConfig{})
			b, _ := NewMemory(p, MemoryConfig{})
			for i := range 7 {
				if _, err := a.AllowN(ctx, "k", t0.Add(time.Duration(i)*time.Second), 1); err != nil {
					t.Fatal(err)
				}
			}
			_, _ = a.AllowN(ctx, "other", t0, 1)
			n := 0
			a.Export(t0.Add(7*time.Second), func(k string) bool { return k == "k" }, func(k string, exp int64, st []byte) {
				n++
				if err := b.Import(k, exp, append([]byte(nil), st...)); err != nil {
					t.Fatal(err)
				}
				if err := b.Import(k, exp, st[:len(st)-1]); !errors.Is(err, ErrBadState) {
					t.Errorf("a state cut short: %v, want ErrBadState", err)
				}
			})
			if n != 1 || b.Len() != 1 {
				t.Fatalf("exported %d keys, imported %d; want the one kept", n, b.Len())
			}
			for i := range 20 {
				at := t0.Add(7*time.Second + time.Duration(i)*700*time.Millisecond)
				da, _ := a.AllowN(ctx, "k", at, 1)
				db, _ := b.AllowN(ctx, "k", at, 1)
				if fmt.Sprint(da) != fmt.Sprint(db) {
					t.Fatalf("request %d after the handover: %+v, want %+v", i, db, da)
				}
			}
			b.Forget(func(k string) bool { return k == "k" })
			if b.Len() != 0 {
				t.Error("Forget kept the key")
			}
		})
	}
	// A log of more units than the quota (another policy's, or forged) is refused: its
	// ring would outgrow what the algorithm sizes it by.
	big, _ := NewMemory(Policy{Name: "big", Algorithm: SlidingLog, Limit: 50, Window: time.Minute}, MemoryConfig{})
	small, _ := NewMemory(Policy{Name: "small", Algorithm: SlidingLog, Limit: 5, Window: time.Minute}, MemoryConfig{})
	for i := range 20 {
		_, _ = big.AllowN(context.Background(), "k", t0.Add(time.Duration(i)*time.Millisecond), 1)
	}
	big.Export(t0, func(string) bool { return true }, func(k string, exp int64, st []byte) {
		if err := small.Import(k, exp, st); !errors.Is(err, ErrBadState) {
			t.Errorf("a log of 20 into a limit of 5: %v, want ErrBadState", err)
		}
	})
	fw, _ := NewMemory(Policy{Name: "fw", Algorithm: FixedWindow, Limit: 1, Window: time.Minute}, MemoryConfig{})
	tb, _ := NewMemory(Policy{Name: "tb", Algorithm: TokenBucket, Capacity: 1, RefillPerSecond: 1}, MemoryConfig{})
	_, _ = fw.AllowN(context.Background(), "k", t0, 1)
	fw.Export(t0, func(string) bool { return true }, func(k string, exp int64, st []byte) {
		if err := tb.Import(k, exp, st); !errors.Is(err, ErrBadState) {
			t.Errorf("a fixed window's state into a token bucket: %v, want ErrBadState", err)
		}
	})
}

// FuzzImportState holds Import to hostile state (a checkpoint topic anyone with write
// access can fill): any bytes are refused or imported, and the key then decides on
// without a panic, for every algorithm.
func FuzzImportState(f *testing.F) {
	t0 := time.Unix(1_764_489_600, 0)
	policies := []Policy{
		{Name: "fw", Algorithm: FixedWindow, Limit: 10, Window: time.Minute},
		{Name: "sl", Algorithm: SlidingLog, Limit: 10, Window: time.Minute},
		{Name: "sc", Algorithm: SlidingCounter, Limit: 10, Window: time.Minute},
		{Name: "tb", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 0.5},
		{Name: "lb", Algorithm: LeakyBucket, Capacity: 10, LeakPerSecond: 0.5, MaxDelay: time.Second},
	}
	for _, p := range policies {
		m, _ := NewMemory(p, MemoryConfig{})
		for i := range 4 {
			_, _ = m.AllowN(context.Background(), "k", t0.Add(time.Duration(i)*time.Second), 2)
		}
		m.Export(t0, func(string) bool { return true }, func(_ string, _ int64, st []byte) { f.Add(append([]byte(nil), st...)) })
	}
	f.Fuzz(func(t *testing.T, state []byte) {
		for _, p := range policies {
			m, _ := NewMemory(p, MemoryConfig{})
			if err := m.Import("k", t0.Add(time.Minute).UnixNano(), state); err != nil {
				if !errors.Is(err, ErrBadState) {
					t.Fatalf("%s: %v", p.Name, err)
				}
				continue
			}
			for i := range 12 {
				d, err := m.AllowN(context.Background(), "k", t0.Add(time.Duration(i)*300*time.Millisecond), int64(i%3))
				if err != nil {
					t.Fatalf("%s after import: %v", p.Name, err)
				}
				if d.Remaining < 0 {
					t.Fatalf("%s after import: remaining %d", p.Name, d.Remaining)
				}
			}
		}
	})
}
