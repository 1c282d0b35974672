package event

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// otherFormat is a Format of a type the intake does not know: it takes the deferred path.
type otherFormat struct{ *Decoder }

// A Format of another type, given by WithFormat, takes and refuses what the Decoder it wraps
// does, through both doors, with the same details and without allocating per event.
func TestIntakeWithFormat(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 6}})
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	in, err := NewIntake(st, Config{}, WithFormat(func() (Format, error) {
		made++
		d, err := NewDecoder(Config{})
		return otherFormat{d}, err
	}))
	if err != nil {
		t.Fatal(err)
	}
	if made != 1 {
		t.Fatalf("NewIntake made %d formats, want 1 (the one it checks and pools)", made)
	}
	now := defTS
	body := fmt.Appendf(nil, "{\"key\":\"a\",\"metric\":\"m\",\"value\":1}\nnot json\n{\"ts\":%d,\"key\":\"a\",\"metric\":\"m\",\"value\":1}\n", now+time.Hour.Milliseconds())
	res := in.Take(body, now)
	want := Result{Accepted: 1, Parts: 2}
	want.Refused[ReasonInvalidJSON] = 1
	want.Refused[ReasonFuture] = 1
	want.First[ReasonInvalidJSON] = "line 2: invalid JSON: no opening brace at byte 0"
	want.First[ReasonFuture] = "line 3: ts 2025-11-30T09:00:00Z is 1h0m0s ahead of now (skew 10s)"
	if res != want {
		t.Fatalf("Take = %+v, want %+v", res, want)
	}
	f := in.NewFormat()
	if _, ok := f.(otherFormat); !ok {
		t.Fatalf("NewFormat = %T, want the constructor's otherFormat", f)
	}
	var got []string
	rec := Record{TS: now, Feed: window.FeedOf(2)}
	acc, n := in.TakeRecord(f, body, now, rec, func(part []byte, r Reason) { got = append(got, r.String()+" "+string(part)) })
	if acc != 1 || n != 3 || len(got) != 2 || got[0] != "invalid_json not json" || got[1][:7] != "future " {
		t.Fatalf("TakeRecord = %d accepted of %d, refused %q", acc, n, got)
	}
	line := []byte(`{"key":"a","metric":"m","value":1}`)
	refused := func([]byte, Reason) { t.Fatal("refused") }
	if a := testing.AllocsPerRun(100, func() { in.TakeRecord(f, line, now, rec, refused) }); a != 0 {
		t.Errorf("TakeRecord through another format: %v allocations per record", a)
	}
	if _, err := NewIntake(st, Config{}, WithFormat(func() (Format, error) { return nil, errors.New("no such format") })); err == nil {
		t.Error("a failing format constructor accepted")
	}
}
