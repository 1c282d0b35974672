package logrepeat

import (
	"fmt"
	"testing"
	"time"
)

func TestRepeatsHeldBackAndCounted(t *testing.T) {
	l := New(time.Minute)
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	l.now = func() time.Time { return now }
	if ok, held := l.Allow("dial refused"); !ok || held != 0 {
		t.Fatalf("a new text: Allow = %v, %d; want true, 0", ok, held)
	}
	for i := range 59 {
		now = t0.Add(time.Duration(i+1) * time.Second)
		if ok, _ := l.Allow("dial refused"); ok {
			t.Fatalf("the same text %s later was written; want it held back", now.Sub(t0))
		}
		if ok, _ := l.Allow(fmt.Sprintf("other %d", i)); !ok {
			t.Fatalf("a different text was held back")
		}
	}
	now = t0.Add(time.Minute)
	if ok, held := l.Allow("dial refused"); !ok || held != 59 {
		t.Fatalf("a minute on: Allow = %v, %d; want true, 59 held back", ok, held)
	}
	if got := l.Attrs(59); fmt.Sprint(got) != "[repeated 59 over 1m0s]" {
		t.Errorf("Attrs(59) = %v", got)
	}
	if got := l.Attrs(0); got != nil {
		t.Errorf("Attrs(0) = %v, want none", got)
	}
	now = now.Add(time.Second)
	if ok, _ := l.Allow("dial refused"); ok {
		t.Fatal("the count restarted, yet the text was written a second after it was")
	}
}

// The texts remembered stay bounded; a text forgotten is written again at once.
func TestRepeatsBounded(t *testing.T) {
	l := New(time.Hour)
	for i := range 10 * maxKeys {
		l.Allow(fmt.Sprint(i))
		if len(l.seen) > maxKeys {
			t.Fatalf("%d texts remembered, at most %d", len(l.seen), maxKeys)
		}
	}
}

func TestRepeatsIgnoreTheLocalPort(t *testing.T) {
	l := New(time.Minute)
	l.Allow("read tcp 127.0.0.1:57678->127.0.0.1:42321: read: connection reset by peer")
	if ok, _ := l.Allow("read tcp 127.0.0.1:57750->127.0.0.1:42321: read: connection reset by peer"); ok {
		t.Error("a retry's new local port made the same failure a new text")
	}
	if ok, _ := l.Allow("read tcp 127.0.0.1:57750->127.0.0.1:42322: read: connection reset by peer"); !ok {
		t.Error("another broker's failure was held back")
	}
}

// A line the caller's other limit refuses is held back, not lost: its text stays due, and
// the next line written says it.
func TestAllowIfRefusedStaysDue(t *testing.T) {
	l := New(time.Minute)
	t0 := time.Unix(1_700_000_000, 0)
	l.now = func() time.Time { return t0 }
	no := func() bool { return false }
	yes := func() bool { return true }
	if ok, _ := l.AllowIf("dial refused", no); ok {
		t.Fatal("written though write refused")
	}
	if ok, held := l.AllowIf("dial refused", yes); !ok || held != 1 {
		t.Fatalf("after a refused first line: AllowIf = %v, %d; want true, 1", ok, held)
	}
	l.now = func() time.Time { return t0.Add(time.Minute) }
	if ok, _ := l.AllowIf("dial refused", no); ok {
		t.Fatal("written though write refused")
	}
	if ok, held := l.AllowIf("dial refused", yes); !ok || held != 1 {
		t.Fatalf("after a refused due line: AllowIf = %v, %d; want true, 1", ok, held)
	}
	if ok, _ := l.AllowIf("dial refused", yes); ok {
		t.Fatal("written twice within a minute")
	}
}
