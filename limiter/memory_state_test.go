package limiter

import (
	"context"
	"encoding/binary"
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
	// A log of more units than the quota (a plan's limit cut since, or forged) keeps its
	// newest entries up to the quota: the key stays denied until the one that had to
	// leave with all of them leaves, the 16th of 20 for a limit of 5.
	big, _ := NewMemory(Policy{Name: "big", Algorithm: SlidingLog, Limit: 50, Window: time.Minute}, MemoryConfig{})
	small, _ := NewMemory(Policy{Name: "small", Algorithm: SlidingLog, Limit: 5, Window: time.Minute}, MemoryConfig{})
	for i := range 20 {
		_, _ = big.AllowN(context.Background(), "k", t0.Add(time.Duration(i)*time.Millisecond), 1)
	}
	big.Export(t0, func(string) bool { return true }, func(k string, exp int64, st []byte) {
		if err := small.Import(k, exp, st); err != nil {
			t.Fatalf("a log of 20 into a limit of 5: %v", err)
		}
	})
	at := t0.Add(20 * time.Millisecond)
	if d, _ := small.AllowN(context.Background(), "k", at, 1); d.Allowed || d.RetryAfter != time.Minute-5*time.Millisecond {
		t.Errorf("a log of 20 in a limit of 5: %+v, want denied until the 16th entry (15 ms) leaves", d)
	}
	if d, _ := small.AllowN(context.Background(), "k", at.Add(time.Minute-5*time.Millisecond), 1); !d.Allowed {
		t.Errorf("a log of 20 in a limit of 5, once the 16th entry left: %+v, want allowed", d)
	}
	// A fixed window past its quota stays denied to the window's end; a bucket past its
	// capacity is full.
	for _, c := range []struct {
		from, to Policy
		allowed  bool
	}{
		{Policy{Name: "fw", Algorithm: FixedWindow, Limit: 10, Window: time.Minute}, Policy{Name: "fw", Algorithm: FixedWindow, Limit: 3, Window: time.Minute}, false},
		{Policy{Name: "sc", Algorithm: SlidingCounter, Limit: 10, Window: time.Minute}, Policy{Name: "sc", Algorithm: SlidingCounter, Limit: 3, Window: time.Minute}, false},
		{Policy{Name: "tb", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 0.01}, Policy{Name: "tb", Algorithm: TokenBucket, Capacity: 3, RefillPerSecond: 0.01}, true},
	} {
		from, _ := NewMemory(c.from, MemoryConfig{})
		to, _ := NewMemory(c.to, MemoryConfig{})
		for i := range 6 {
			_, _ = from.AllowN(context.Background(), "k", t0.Add(time.Duration(i)*time.Millisecond), 1)
		}
		from.Export(t0, func(string) bool { return true }, func(k string, exp int64, st []byte) {
			if err := to.Import(k, exp, st); err != nil {
				t.Fatalf("%s: 6 of 10 into a quota of 3: %v", c.to.Name, err)
			}
		})
		d, _ := to.AllowN(context.Background(), "k", t0.Add(10*time.Millisecond), 1)
		if d.Allowed != c.allowed || d.Remaining < 0 {
			t.Errorf("%s: 6 of 10 into a quota of 3: %+v, want allowed %v", c.to.Name, d, c.allowed)
		}
	}
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
	// A sliding log's compact form (written past logCompactFrom entries).
	f.Add(appendLogCompact(nil, &slidingLog{e: []logEntry{{t: t0.UnixNano(), end: 2}, {t: t0.UnixNano() + 5, end: 3}}, n: 2}))
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

// appendLogAbsolute is a sliding log's state as every slide wrote it before the compact
// form (and as it still writes a log of logCompactFrom entries or fewer).
func appendLogAbsolute(b []byte, s *slidingLog) []byte {
	b = binary.AppendVarint(b, s.base)
	b = binary.AppendUvarint(b, uint64(s.n))
	for i := range s.n {
		b = binary.AppendVarint(b, s.at(i).t)
		b = binary.AppendVarint(b, s.at(i).end)
	}
	return b
}

// TestLongLogStateIsCompact: a sliding log past logCompactFrom entries is exported in the
// compact form, at ~5 bytes an entry (the absolute form's ~12 made a log of 100,000 entries
// 1.2 MB, past a Kafka record, so clusterlimit's checkpoint of it failed and a new owner
// admitted the key's limit again), and imported it decides on as the original does; so
// does its absolute form (a checkpoint of a slide before the compact form), and a small
// log keeps the absolute form, which such a slide reads. A compact state cut short or out
// of order is refused. A log of MaxLogLimit entries spread over MaxWindow, the largest an
// honest log gets, stays under 800 KB, below a broker's 1 MB record.
func TestLongLogStateIsCompact(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_764_489_600, 0)
	p := Policy{Name: "sl", Algorithm: SlidingLog, Limit: 5000, Window: time.Hour}
	fill := func(m *Memory, n int, every time.Duration, cost int64) {
		for i := range n {
			if d, _ := m.AllowN(ctx, "k", t0.Add(time.Duration(i)*every), cost); !d.Allowed {
				t.Fatalf("unit %d: %+v", i, d)
			}
		}
	}
	export := func(m *Memory) (exp int64, st []byte) {
		m.Export(t0, func(string) bool { return true }, func(_ string, e int64, s []byte) { exp, st = e, append([]byte(nil), s...) })
		return exp, st
	}
	small, _ := NewMemory(p, MemoryConfig{})
	fill(small, logCompactFrom, 30*time.Millisecond, 1)
	if _, st := export(small); st[0] == logCompact {
		t.Errorf("a log of %d entries in the compact form: a slide before it would refuse it", logCompactFrom)
	}

	a, _ := NewMemory(p, MemoryConfig{})
	fill(a, 3000, 30*time.Millisecond, 1)
	_, _ = a.AllowN(ctx, "k", t0.Add(3000*30*time.Millisecond), 7) // an entry of 7 units
	exp, st := export(a)
	if st[0] != logCompact || len(st) > 5*3001+16 {
		t.Fatalf("a log of 3001 entries: %d bytes, marker %d; want the compact form, ~5 bytes an entry", len(st), st[0])
	}
	var abs []byte
	a.sl.locked(func(sh *shard[slidingLog]) {
		for e := sh.front; e != nil; e = e.next {
			abs = appendLogAbsolute(nil, &e.s)
		}
	})
	t.Logf("3001 entries 30 ms apart: %d bytes compact, %d absolute", len(st), len(abs))
	var ms []*Memory
	for _, form := range [][]byte{st, abs} {
		m, _ := NewMemory(p, MemoryConfig{})
		if err := m.Import("k", exp, form); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	for i := range 40 {
		at := t0.Add(3000*30*time.Millisecond + time.Duration(i)*97*time.Second)
		want, _ := a.AllowN(ctx, "k", at, 1000)
		for j, m := range ms {
			if got, _ := m.AllowN(ctx, "k", at, 1000); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("form %d, request %d after the import: %+v, want %+v", j, i, got, want)
			}
		}
	}
	m, _ := NewMemory(p, MemoryConfig{})
	for _, bad := range [][]byte{st[:len(st)-1], append(append([]byte(nil), st[:len(st)-1]...), 0)} {
		if err := m.Import("k", exp, bad); !errors.Is(err, ErrBadState) {
			t.Errorf("a compact state cut short, or with an entry of no units: %v, want ErrBadState", err)
		}
	}

	// The largest honest log: MaxLogLimit entries, the window's span apart.
	big, _ := NewMemory(Policy{Name: "sl", Algorithm: SlidingLog, Limit: MaxLogLimit, Window: MaxWindow}, MemoryConfig{})
	fill(big, MaxLogLimit, MaxWindow/MaxLogLimit, 1)
	if _, st := export(big); len(st) > 800_000 {
		t.Errorf("a log of %d entries over %s: %d bytes, want under 800 KB", MaxLogLimit, MaxWindow, len(st))
	} else {
		t.Logf("%d entries over %s: %d bytes", MaxLogLimit, MaxWindow, len(st))
	}
}
