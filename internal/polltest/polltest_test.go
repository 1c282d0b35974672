package polltest

import (
	"fmt"
	"testing"
	"time"
)

type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestEventuallyWaitsAndFails(t *testing.T) {
	n := 0
	Eventually(t, time.Second, time.Millisecond, func() bool { n++; return n == 3 }, func() string { return "never" })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
	r := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("recovered %v, want the recorder's Fatalf", p)
			}
		}()
		Eventually(r, 20*time.Millisecond, time.Millisecond, func() bool { return false }, func() string { return "the lag at 0" })
	}()
	if r.msg != "after 20ms: the lag at 0" {
		t.Errorf("failure message format %q", r.msg)
	}
}
