package event

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// newTestIntake is an intake into a fresh store of one minute (6 slots of 10 s, skew 10 s).
func newTestIntake(t testing.TB) (*Intake, *window.Store) {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 6}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewIntake(st, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return in, st
}

// Take (POST /v1/events): each line decoded and observed at now, the decoder's refusals and
// the store's counted by reason, blank lines skipped, events without ts at now.
func TestIntakeTake(t *testing.T) {
	in, st := newTestIntake(t)
	now := defTS
	body := fmt.Appendf(nil, `{"ts":%d,"key":"a","metric":"m","value":1}

{"key":"a","metric":"m","value":2,"count":3}
not json
{"ts":%d,"key":"a","metric":"m","value":1}
{"ts":%d,"key":"a","metric":"m","value":1}
{"key":"a","metric":"m","value":NaN}
`, now-1000, now-time.Hour.Milliseconds(), now+time.Hour.Milliseconds())
	res := in.Take(body, now)
	want := Result{Accepted: 2, Parts: 4} // a line each
	want.Refused[ReasonInvalidJSON] = 1
	want.Refused[ReasonLate] = 1
	want.Refused[ReasonFuture] = 1
	want.Refused[ReasonInvalidValue] = 1
	want.First[ReasonInvalidJSON] = "line 4: invalid JSON: no opening brace at byte 0"
	want.First[ReasonLate] = "line 5: ts 2025-11-30T07:00:00Z is 1h0m0s behind now (retention 1m0s)"
	want.First[ReasonFuture] = "line 6: ts 2025-11-30T09:00:00Z is 1h0m0s ahead of now (skew 10s)"
	want.First[ReasonInvalidValue] = `line 7: field "value": NaN`
	if res != want {
		t.Fatalf("Take = %+v, want %+v", res, want)
	}
	agg, err := st.ReadAt(now, "m", "a", time.Minute, nil)
	if err != nil || agg.Count != 4 {
		t.Fatalf("store holds count %d (%v), want 4", agg.Count, err)
	}
	if got := st.DropPartition(0); got != 0 {
		t.Errorf("events of the API carry no feed, yet partition 0's revocation dropped %d series", got)
	}
}

// TakeRecord (a Kafka record): the record's timestamp is the default ts and what future and
// late are judged against, each event carries the record's feed, every refusal reaches the
// callback with its line, an event out of its window by now is expired, and a value without
// events is told apart.
func TestIntakeTakeRecord(t *testing.T) {
	in, st := newTestIntake(t)
	d := in.NewDecoder()
	now := defTS
	rec := Record{TS: now, Feed: window.FeedOf(3)}
	type refusal struct {
		line string
		r    Reason
	}
	var got []refusal
	refused := func(line []byte, r Reason) { got = append(got, refusal{string(line), r}) }

	acc, n := in.TakeRecord(d, []byte(`{"key":"a","metric":"m","value":1}`+"\n"+`{"metric":"m","value":1}`), now, rec, refused)
	if acc != 1 || n != 2 || len(got) != 1 || got[0] != (refusal{`{"metric":"m","value":1}`, ReasonMissingField}) {
		t.Fatalf("TakeRecord = %d accepted of %d, refusals %v", acc, n, got)
	}
	if agg, err := st.ReadAt(now, "m", "a", time.Minute, nil); err != nil || agg.Count != 1 || agg.To < now-10_000 {
		t.Fatalf("the event without ts: %+v, %v; want it at the record's time", agg, err)
	}

	// Stamped two minutes ago, its event in its window then; read now, out of it.
	got = nil
	old := Record{TS: now - 2*time.Minute.Milliseconds(), Feed: rec.Feed}
	if acc, n := in.TakeRecord(d, []byte(`{"key":"b","metric":"m","value":1}`), now, old, refused); acc != 0 || n != 1 ||
		len(got) != 1 || got[0].r != ReasonExpired {
		t.Fatalf("an expired event: %d accepted of %d, refusals %v", acc, n, got)
	}
	if why := in.Explain(d, []byte(got[0].line), got[0].r, now, &old); why != "ts 2025-11-30T07:58:00Z is 2m0s behind now (retention 1m0s)" {
		t.Errorf("the expired event explained as %q", why)
	}
	// Ahead of its record, stamped now, by more than the skew: future.
	got = nil
	if acc, _ := in.TakeRecord(d, fmt.Appendf(nil, `{"ts":%d,"key":"b","metric":"m","value":1}`, now+20_000), now, rec, refused); acc != 0 ||
		len(got) != 1 || got[0].r != ReasonFuture {
		t.Fatalf("an event ahead of its record: %d accepted, refusals %v", acc, got)
	}
	if why := in.Explain(d, []byte(got[0].line), got[0].r, now, &rec); why != "ts 2025-11-30T08:00:20Z is 20s ahead of the record (skew 10s)" {
		t.Errorf("the future event explained as %q", why)
	}
	if why := in.Explain(d, []byte(`{"metric":"m","value":1}`), ReasonMissingField, now, &rec); why != `no field "key"` {
		t.Errorf("the event without key explained as %q", why)
	}

	if acc, n := in.TakeRecord(d, nil, now, rec, refused); acc != 0 || n != 0 {
		t.Fatalf("a tombstone: %d accepted of %d", acc, n)
	}
	if dropped := st.DropPartition(3); dropped != 1 {
		t.Fatalf("DropPartition(3) dropped %d series, want the one the record fed", dropped)
	}
}

// The per-event path allocates nothing once the series and its names exist, through either door,
// with labels or without.
func TestIntakeAllocs(t *testing.T) {
	in, _ := newTestIntake(t)
	d := in.NewDecoder()
	line := []byte(`{"ts":1764489600000,"key":"tenant-42","metric":"latency_ms","value":87.5}
{"ts":1764489600000,"key":"tenant-42","metric":"latency_ms","value":87.5,"labels":{"route":"/pay","code":"200","method":"POST"}}`)
	rec := Record{TS: defTS, Feed: window.FeedOf(0)}
	refused := func([]byte, Reason) { t.Fatal("refused") }
	in.TakeRecord(d, line, defTS, rec, refused)
	if a := testing.AllocsPerRun(100, func() { in.TakeRecord(d, line, defTS, rec, refused) }); a != 0 {
		t.Errorf("TakeRecord: %v allocations per record", a)
	}
	in.Take(line, defTS)
	if raceEnabled {
		return // Take's pool of decoders drops them at random under the race detector
	}
	if a := testing.AllocsPerRun(100, func() {
		if res := in.Take(line, defTS); res.Accepted != 2 {
			t.Fatalf("Take = %+v", res)
		}
	}); a != 0 {
		t.Errorf("Take: %v allocations per body", a)
	}
}

func TestNewIntake(t *testing.T) {
	if _, err := NewIntake(nil, Config{}); err == nil {
		t.Error("a nil store accepted")
	}
	st, _ := window.NewStore(window.StoreConfig{})
	if _, err := NewIntake(st, Config{MaxKeyLen: -1}); err == nil {
		t.Error("a negative key length accepted")
	}
}

// A ts in the wrong unit is decades off: the refusal says by how much without overflowing a
// time.Duration, and names the likely unit.
func TestIntakeExplainsTheWrongUnit(t *testing.T) {
	in, _ := newTestIntake(t)
	now := defTS // 2025-11-30T08:00:00Z
	for _, c := range []struct {
		ts   int64
		r    Reason
		want string
	}{
		{now / 1000, ReasonLate, "ts 1970-01-21T10:08:09.6Z is 56 years behind now (retention 1m0s): 1000× too small, a ts in seconds where milliseconds are read?"},
		{now * 1000, ReasonFuture, "ts 57884-06-13T08:00:00Z is 55857 years ahead of now (skew 10s): 1000× too large, a ts in microseconds where milliseconds are read?"},
		{now * 1000000, ReasonFuture, "ts 55916419-07-14T08:00:00Z is 55913245 years ahead of now (skew 10s): 1,000,000× too large, a ts in nanoseconds where milliseconds are read?"},
		{now - 3*24*3600*1000, ReasonLate, "ts 2025-11-27T08:00:00Z is 3 days behind now (retention 1m0s)"},
		{now - 47*3600*1000, ReasonLate, "ts 2025-11-28T09:00:00Z is 47h0m0s behind now (retention 1m0s)"},
	} {
		res := in.Take(fmt.Appendf(nil, `{"ts":%d,"key":"a","metric":"m","value":1}`, c.ts), now)
		if got := res.First[c.r]; got != "line 1: "+c.want {
			t.Errorf("ts %d: refusal %q,\n want %q", c.ts, got, "line 1: "+c.want)
		}
	}
}

// The unit hint names the unit the format reads: an --event-map reading its ts in seconds
// (nginx's msec) or microseconds said of a ts in milliseconds that it was "in microseconds
// where milliseconds are read", or "in seconds", sending the user to fix the wrong side.
func TestIntakeExplainsTheWrongUnitOfAMap(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 6}})
	if err != nil {
		t.Fatal(err)
	}
	now := defTS // 2025-11-30T08:00:00Z
	for _, c := range []struct {
		unit string
		ts   int64
		want string
	}{
		{"s", now, "1000× too large, a ts in milliseconds where seconds are read?"},
		{"us", now, "1000× too small, a ts in milliseconds where microseconds are read?"},
		{"ns", now, "1,000,000× too small, a ts in milliseconds where nanoseconds are read?"},
		{"ns", now / 1000, "1,000,000,000× too small, a ts in seconds where nanoseconds are read?"},
		{"us", now * 1000, ""}, // right
		{"", now * 1000, "1000× too large, a ts in microseconds where milliseconds are read?"},
	} {
		m := Map{Metrics: []MapMetric{{Metric: "m", TS: MapTS{Field: "t", Unit: c.unit}, Value: MapValue{Field: "v"}, Key: MapKey{Field: "k"}}}}
		in, err := NewIntake(st, Config{}, WithFormat(func() (Format, error) { return NewMapDecoder(m, Config{}) }))
		if err != nil {
			t.Fatal(err)
		}
		res := in.Take(fmt.Appendf(nil, `{"t":%d,"k":"a","v":1}`, c.ts), now)
		got := res.First[ReasonFuture] + res.First[ReasonLate]
		if c.want == "" {
			if got != "" {
				t.Errorf("unit %s, ts %d: refused %q", c.unit, c.ts, got)
			}
			continue
		}
		if !strings.HasSuffix(got, ": "+c.want) {
			t.Errorf("unit %s, ts %d: refusal %q,\n want it to end %q", c.unit, c.ts, got, c.want)
		}
	}
}

// A series_cap refusal names the cap it met, so that an operator knows which flag to
// raise: the store's series (--max-series, or what --max-memory sets), the metric's
// (--max-series-per-metric), or --max-memory's bytes.
func TestExplainSeriesCapNamesTheCap(t *testing.T) {
	ring := window.RingConfig{Slot: 10 * time.Second, Slots: 6}
	for _, tc := range []struct {
		name string
		cfg  window.StoreConfig
		want string
	}{
		{"max series", window.StoreConfig{MaxSeries: 2}, `a new series of metric "m" over the series cap: the store holds its 2 series (--max-series, or what --max-memory sets)`},
		{"per metric", window.StoreConfig{MaxSeriesPerMetric: 2}, `a new series of metric "m" over the series cap: the metric holds its 2 series (--max-series-per-metric)`},
		{"bytes", window.StoreConfig{MaxBytes: int64(2.5 * float64(window.TieredSeriesBytes(ring)))},
			fmt.Sprintf(`a new series of metric "m" over the series cap: its %d bytes when busy would take the store's series past %d (--max-memory)`,
				window.TieredSeriesBytes(ring), int64(2.5*float64(window.TieredSeriesBytes(ring))))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Ring = ring
			st, err := window.NewStore(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			in, err := NewIntake(st, Config{})
			if err != nil {
				t.Fatal(err)
			}
			d := in.NewDecoder()
			var refused [][]byte
			for _, k := range []string{"a", "b", "c"} {
				in.TakeRecord(d, fmt.Appendf(nil, `{"key":%q,"metric":"m","value":1}`, k), defTS, Record{TS: defTS}, func(line []byte, r Reason) {
					if r == ReasonSeriesCap {
						refused = append(refused, slices.Clone(line))
					}
				})
			}
			if len(refused) != 1 {
				t.Fatalf("%d refused at the cap, want 1", len(refused))
			}
			if got := in.Explain(d, refused[0], ReasonSeriesCap, defTS, nil); got != tc.want {
				t.Errorf("explained as\n%q, want\n%q", got, tc.want)
			}
		})
	}
}
