package event_test

import (
	"fmt"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

func ExampleDecoder_DecodeLines() {
	dec, err := event.NewDecoder(event.Config{})
	if err != nil {
		panic(err)
	}
	record := []byte(`{"ts": 1764489600123, "key": "tenant-42", "metric": "latency_ms", "value": 87.5}
{"key": "tenant-42", "metric": "latency_ms", "value": 12, "ts": "2025-11-30T08:00:01Z", "count": 3}
{"key": "tenant-42", "metric": "latency_ms", "value": NaN}
{"metric": "latency_ms", "value": 1}
`)
	recordTS := int64(1764489600000) // the Kafka record's timestamp: the default ts
	dec.DecodeLines(record, recordTS, func(line []byte, ev window.Event, r event.Reason) {
		if r != event.ReasonNone {
			fmt.Printf("refused (%s): %s\n", r, line)
			return
		}
		fmt.Printf("%s %s ts=%d value=%v count=%d\n", ev.Metric, ev.Key, ev.TS, ev.Value, ev.Count)
	})
	// Output:
	// latency_ms tenant-42 ts=1764489600123 value=87.5 count=1
	// latency_ms tenant-42 ts=1764489601000 value=12 count=3
	// refused (invalid_value): {"key": "tenant-42", "metric": "latency_ms", "value": NaN}
	// refused (missing_field): {"metric": "latency_ms", "value": 1}
}

func ExampleAppend() {
	line := event.Append(nil, window.Event{TS: 1764489600123, Key: "tenant-42", Metric: "cost", Value: 2, Count: 5})
	fmt.Println(string(line))
	// Output:
	// {"ts":1764489600123,"key":"tenant-42","metric":"cost","value":2,"count":5}
}

func ExampleReasonOf() {
	fmt.Println(event.ReasonOf(window.ErrLate), event.ReasonOf(window.ErrSeriesCap), event.ReasonOf(nil))
	// Output:
	// late series_cap none
}

func ExampleIntake_Take() {
	store, err := window.NewStore(window.StoreConfig{}) // 10 s slots, 5 minutes
	if err != nil {
		panic(err)
	}
	in, err := event.NewIntake(store, event.Config{})
	if err != nil {
		panic(err)
	}
	now := int64(1764489600000) // the request's time: the ts of events without one
	res := in.Take([]byte(`{"key": "tenant-42", "metric": "latency_ms", "value": 87.5}
{"key": "tenant-42", "metric": "latency_ms", "value": "fast"}
{"ts": 1764486000000, "key": "tenant-42", "metric": "latency_ms", "value": 12}
`), now)
	fmt.Println("accepted", res.Accepted)
	for _, r := range event.RejectReasons() {
		if n := res.Refused[r]; n > 0 {
			fmt.Println(r, n)
		}
	}
	// Output:
	// accepted 1
	// bad_field 1
	// late 1
}
